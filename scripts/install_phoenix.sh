#!/usr/bin/env bash
# Install Arize Phoenix's server into .venv-phoenix, an environment of its own, for the tests
# that start a real Phoenix (tests/test_report_phoenix.py). Its pins do not fit the core's
# (openai >= 3 through its agent library; groundjudge takes openai < 3), and it is large (about
# 850 MB). groundjudge itself talks to it through the client in the `phoenix` extra.
set -euo pipefail
cd "$(dirname "$0")/.."

if .venv-phoenix/bin/phoenix --help >/dev/null 2>&1; then
    exit 0
fi
log=/tmp/groundjudge-phoenix-install.log
echo "groundjudge: installing Phoenix's server into .venv-phoenix for its tests (about 850 MB; log: $log)"
started=$(date +%s)
python3 -m venv .venv-phoenix
if ! .venv-phoenix/bin/pip install "arize-phoenix==20.26.1" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "groundjudge: Phoenix's install failed (last lines of $log above); its tests will skip" >&2
    exit 0
fi
echo "groundjudge: Phoenix installed in $(( $(date +%s) - started )) s"
