#!/usr/bin/env bash
# Build the JupyterLab sidebar (labextension/) into det_jupyter/labextension/, where the wheel
# picks it up as data files (share/jupyter/labextensions/det-jupyter): installing a built wheel
# needs no Node. Building needs Node >= 20 and npm, and works offline but for the npm registry:
# @jupyterlab/core-meta is a devDependency, so the builder never fetches core metadata from GitHub.
#   --develop  also link the build into this venv's share/jupyter/labextensions (an editable
#              install does not install data files, so `jupyter lab` would not see it)
set -euo pipefail
cd "$(dirname "$0")/.."
JUPYTER=${JUPYTER:-$PWD/.venv/bin/jupyter}
develop=0
[ "${1:-}" = "--develop" ] && develop=1

command -v npm >/dev/null || { echo "build_labextension: npm not found (install Node.js >= 20)" >&2; exit 1; }
[ -x "$JUPYTER" ] || { echo "build_labextension: $JUPYTER not found (pip install -e '.[test]')" >&2; exit 1; }

cd labextension
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
rm -rf lib tsconfig.tsbuildinfo ../det_jupyter/labextension   # never ship a stale build
npx tsc
PATH="$(dirname "$JUPYTER"):$PATH" "$JUPYTER" labextension build .
cp install.json ../det_jupyter/labextension/install.json
cd ..

if [ "$develop" = 1 ]; then
  prefix=$("$(dirname "$JUPYTER")/python" -c 'import sys; print(sys.prefix)')
  mkdir -p "$prefix/share/jupyter/labextensions"
  ln -sfn "$PWD/det_jupyter/labextension" "$prefix/share/jupyter/labextensions/det-jupyter"
  echo "linked $prefix/share/jupyter/labextensions/det-jupyter -> det_jupyter/labextension"
fi
echo "built det_jupyter/labextension ($(du -sh det_jupyter/labextension | cut -f1))"
