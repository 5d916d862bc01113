#!/usr/bin/env bash
# Build the JupyterLab sidebar (labextension/) into det_jupyter/labextension/, where the package's
# data files pick it up (share/jupyter/labextensions/det-jupyter): installing a built wheel needs
# no Node. setup.py runs this when a wheel or an editable install is built and the build is
# missing or older than its sources; run it by hand after editing labextension/.
# Building needs Node >= 20, npm and the jupyter-builder Python package (jupyter-builder==1.3.0:
# a build requirement in pyproject.toml, and a dependency of jupyterlab), and works offline but
# for the npm registry: @jupyterlab/core-meta is a devDependency, so the builder never fetches
# core metadata from GitHub.
#   --develop  also link the build into this venv's share/jupyter/labextensions (a rebuild is
#              then seen without reinstalling; an install copies the build)
# JUPYTER_BUILDER: the jupyter-builder to use (default: .venv's, else the one on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
develop=0
[ "${1:-}" = "--develop" ] && develop=1

BUILDER=${JUPYTER_BUILDER:-}
if [ -z "$BUILDER" ]; then
  if [ -x "$PWD/.venv/bin/jupyter-builder" ]; then
    BUILDER=$PWD/.venv/bin/jupyter-builder
  else
    BUILDER=$(command -v jupyter-builder || true)
  fi
fi
command -v npm >/dev/null || { echo "build_labextension: npm not found (install Node.js >= 20)" >&2; exit 1; }
[ -n "$BUILDER" ] && [ -x "$BUILDER" ] || {
  echo "build_labextension: jupyter-builder not found (pip install jupyter-builder==1.3.0)" >&2; exit 1; }

cd labextension
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
rm -rf lib tsconfig.tsbuildinfo ../det_jupyter/labextension   # never ship a stale build
npx tsc
"$BUILDER" build .
cp install.json ../det_jupyter/labextension/install.json
cd ..

if [ "$develop" = 1 ]; then
  prefix=$("${PYTHON:-$PWD/.venv/bin/python}" -c 'import sys; print(sys.prefix)')
  mkdir -p "$prefix/share/jupyter/labextensions"
  rm -rf "$prefix/share/jupyter/labextensions/det-jupyter"
  ln -sfn "$PWD/det_jupyter/labextension" "$prefix/share/jupyter/labextensions/det-jupyter"
  echo "linked $prefix/share/jupyter/labextensions/det-jupyter -> det_jupyter/labextension"
fi
echo "built det_jupyter/labextension ($(du -sh det_jupyter/labextension | cut -f1))"
