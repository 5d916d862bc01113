#!/usr/bin/env bash
# Run the benchmark suite from a clean clone: installs det-jupyter into .venv when missing,
# then bench/run_all.py (peer venvs are made by it; DET_BENCH_PEERS=mlflow,optuna,ray adds
# Ray Tune). Writes bench/results.json, bench/report.md and bench/plots/*.png.
#   extra arguments go to run_all.py (e.g. --sqlite-only, --only bm5_query, --smoke)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import det_jupyter, det_harness" 2>/dev/null; then
  echo "==> installing det-jupyter into .venv"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/pip install -q -e '.[test]'
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && command -v pg_ctlcluster >/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect 15 main start 2>/dev/null || true
fi
exec .venv/bin/python bench/run_all.py "$@"
