#!/usr/bin/env bash
# Install det-jupyter, start a master with an embedded agent (SQLite, process runtime) in the
# background, run the example adaptive ASHA search to completion, print the best trial, then
# what to open and how to log in. The master keeps running: `.venv/bin/det-jupyter down` stops it.
# Installing from the clone builds the JupyterLab sidebar (setup.py): it needs Node >= 20 and npm
# (a wheel does not: `pip install det_jupyter-*.whl`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DATA_DIR=${DET_DATA_DIR:-$PWD/.det-data}
PORT=${DET_PORT:-8080}

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PY" -m venv .venv
fi
echo "==> installing det-jupyter (with JupyterLab and its sidebar) and the example's torch==2.13.0 (CPU)"
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/pip install -q -e '.[examples]'

echo "==> starting the master on port $PORT (data in $DATA_DIR)"
.venv/bin/det-jupyter up --detach --port "$PORT" --data-dir "$DATA_DIR"

echo "==> running examples/mlp_core_api/adaptive.yaml (adaptive ASHA, 16 trials, 2 at a time)"
.venv/bin/det-jupyter submit examples/mlp_core_api/adaptive.yaml examples/mlp_core_api \
  --data-dir "$DATA_DIR" --wait
echo
echo "==> open http://127.0.0.1:$PORT/ in a browser: JupyterLab, with the det-jupyter sidebar"
if [ -f "$DATA_DIR/admin_password" ]; then
  echo "    log in as admin with the password in $DATA_DIR/admin_password"
else
  echo "    log in as admin with the DET_ADMIN_PASSWORD the master was first started with"
fi
echo "    the det CLI: export DET_MASTER=http://127.0.0.1:$PORT; .venv/bin/det user login admin"
echo "    stop the master with: .venv/bin/det-jupyter down --data-dir $DATA_DIR"
