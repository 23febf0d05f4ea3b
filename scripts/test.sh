#!/usr/bin/env bash
# Install groundjudge with its test tools, the embedded judge, the embedding model behind ΔS and Ray,
# install Debian's Chromium for the browser tests when this user can, check the code with ruff
# and mypy, then run every test. Extra arguments go to pytest (for example `-m "not local_model"`
# to leave out the tests that run the real judge model). The run fails if the tests fail or if
# ruff or mypy find anything; the tests run either way.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v chromium >/dev/null 2>&1; then
    :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "groundjudge: installing Debian's chromium for the browser tests (log: /tmp/groundjudge-apt.log)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
            >/tmp/groundjudge-apt.log 2>&1; then
        echo "groundjudge: could not install chromium (see /tmp/groundjudge-apt.log); the browser tests will skip"
    fi
else
    echo "groundjudge: chromium is not installed and this user cannot install it (needs root and apt-get):"
    echo "             the browser tests (tests/test_report_html.py and the labelling page) will skip."
    echo "             As root: apt-get install chromium"
fi
scripts/install.sh local dev embeddings phoenix ray
scripts/install_phoenix.sh

# settings in pyproject.toml ([tool.ruff], [tool.mypy])
checks=0
echo "+ ruff check src tests benchmarks"
.venv/bin/ruff check --no-cache --output-format concise src tests benchmarks || checks=1
echo "+ mypy"
.venv/bin/mypy || checks=1

set +e
.venv/bin/python -m pytest -q "$@"
tests=$?
set -e
if [ "$tests" -ne 0 ]; then
    exit "$tests"
fi
if [ "$checks" -ne 0 ]; then
    echo "groundjudge: the tests passed, but ruff or mypy found problems (above)" >&2
    exit 1
fi
