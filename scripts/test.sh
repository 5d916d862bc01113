#!/usr/bin/env bash
# Run the test suite from a fresh clone: installs what it needs, then pytest.
#   DET_TEST_PG_DSN=postgresql://postgres@127.0.0.1:5432/test  also runs the PostgreSQL tests
#   DET_COMPAT_VENV=path  reuses a venv holding determined==0.38.1 (default .venv-det)
#   extra arguments go to pytest (e.g. -k, -x, tests/unit)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# As root, the tests' agents run tasks as the unprivileged det-task user, who must reach the
# checkout's .venv (a task's python) and fixtures. A checkout under a private directory (mktemp
# -d makes one 0700) would fail every task with "Permission denied": give its ancestors the
# search bit (o+x: enter, not list or read), and say so.
if [ "$(id -u)" = 0 ]; then
  dir=$PWD
  while [ "$dir" != / ]; do
    if [ -z "$(find "$dir" -maxdepth 0 -perm -o+x)" ]; then
      chmod o+x "$dir" && echo "test.sh: made $dir searchable by others (o+x) so that tasks run as det-task can reach the checkout" >&2
    fi
    dir=$(dirname "$dir")
  done
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
# Installing builds the JupyterLab sidebar (setup.py), which needs npm; without it, install
# without the sidebar (tests/browser and the front-door wheel test then skip, saying why).
command -v npm >/dev/null || export DET_JUPYTER_SKIP_LABEXTENSION=1
.venv/bin/pip install -q -e '.[test,examples,tensorboard]'

# Browser tests: the built JupyterLab sidebar (built here from labextension/ when missing, which
# needs npm) and Debian's chromium (installed when running as root), driven by the playwright
# package of the test extra (never `playwright install`). Without them tests/browser skips, saying why.
if [ ! -f det_jupyter/labextension/package.json ] && command -v npm >/dev/null; then
  bash scripts/build_labextension.sh
fi
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
    || echo "test.sh: chromium could not be installed; tests/browser will skip" >&2
fi
# The Docker runtime's tests start a private daemon of Debian's docker.io (tests/_docker.py:
# its own data root and socket, no iptables, no bridge) and stop it; they skip, saying why,
# without it or without root.
if ! command -v dockerd >/dev/null && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && apt-get install -y -qq docker.io >/dev/null; } \
    || echo "test.sh: docker.io could not be installed; the Docker runtime tests will skip" >&2
fi

# JupyterHub's proxy for tests/integration/test_jupyterhub.py: configurable-http-proxy from npm,
# cached outside the clone by version (the tests skip, saying why, without it).
CHP_VERSION=5.3.0
export DET_CHP_DIR=${DET_CHP_DIR:-$HOME/.cache/det-jupyter/chp-$CHP_VERSION}
if [ ! -x "$DET_CHP_DIR/node_modules/.bin/configurable-http-proxy" ] && command -v npm >/dev/null; then
  { mkdir -p "$DET_CHP_DIR" && (cd "$DET_CHP_DIR" && npm install --silent --no-audit --no-fund \
      "configurable-http-proxy@$CHP_VERSION" >/dev/null); } \
    || echo "test.sh: configurable-http-proxy could not be installed; the JupyterHub tests will skip" >&2
fi

# The Kubernetes tests (tests/integration/test_k8s_testbed.py, tests/_k8s.py) start a real
# single-node Kubernetes 1.20.2 built from Debian's source by scripts/k8s/build.sh, cached
# outside the clone by version (DET_K8S_HOME, default ~/.cache/det-jupyter/k8s-1.20.2): ~9 min
# once on 2 cores, a no-op after. If it cannot be built, say why; those tests then skip
# (DET_K8S_BUILD=0: the fixture uses a cached build only, and does not try again).
if [ "$(id -u)" = 0 ] && [ "${DET_K8S_BUILD:-1}" != 0 ]; then
  bash scripts/k8s/build.sh \
    || { echo "test.sh: the Kubernetes test bed could not be built (see above); its tests will skip" >&2
         export DET_K8S_BUILD=0; }
fi

# The stock determined client lives in a venv of its own (it ships its own `det`), with torch
# and tensorboard, which its Core API imports at init. Never installed into .venv.
DET_VENV=${DET_COMPAT_VENV:-$PWD/.venv-det}
if [ ! -x "$DET_VENV/bin/python" ] || ! "$DET_VENV/bin/python" -c "import determined, torch, tensorboard" 2>/dev/null; then
  "$PY" -m venv "$DET_VENV"
  "$DET_VENV/bin/pip" install -q determined==0.38.1 torch==2.13.0 tensorboard==2.21.0
fi
export DET_COMPAT_VENV="$DET_VENV"

echo "== ruff: lint"
.venv/bin/ruff check det_jupyter det_agent harness tests

# The structure of issue 26: the layer contracts of pyproject.toml, mypy --strict on the pure
# packages and the wire types, and a mypy baseline elsewhere that may only shrink.
echo "== import-linter: layer contracts ([tool.importlinter] in pyproject.toml)"
.venv/bin/lint-imports
MYPY_STRICT=(det_jupyter/scheduler det_jupyter/searcher det_jupyter/config
             det_agent/wire.py det_agent/_wire_check.py)
echo "== mypy --strict: ${MYPY_STRICT[*]}"
.venv/bin/mypy --strict --follow-imports=silent --cache-dir .mypy_cache/strict "${MYPY_STRICT[@]}"
echo "== mypy baseline: no file gains errors (mypy-baseline.json; scripts/mypy_baseline.py)"
.venv/bin/python scripts/mypy_baseline.py

# Two workers (pytest-xdist): most tests wait on masters, agents and browsers rather than
# compute, so a 2-core machine runs two at once in a little over half the time. A module, and
# the tests sharing a session resource (the wheel, the Docker daemon), stay on one worker
# (tests/conftest.py). DET_TEST_WORKERS=0 runs them all in this process.
WORKERS=${DET_TEST_WORKERS:-2}
XDIST=()
[ "$WORKERS" != 0 ] && XDIST=(-n "$WORKERS" --dist loadfile)
echo "== pytest (${WORKERS} workers)"
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=40 "${XDIST[@]}" "$@"
