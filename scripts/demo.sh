#!/usr/bin/env bash
# Install groundjudge with its embedded judge, then run the main job on the bundled example:
# deterministic metrics, the local judge on every case that needs it, gates and reports
# (runs/example/report.md, report.html, triage.md). Extra arguments go to `groundjudge run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh local
exec .venv/bin/groundjudge run --config examples/groundjudge.toml "$@"
