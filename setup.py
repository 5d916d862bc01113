"""The build hook: the JupyterLab sidebar is built when the package is (everything else is in
pyproject.toml).

A wheel (``pip wheel .``, ``python -m build``) and an editable install (``pip install -e .``)
both run ``build_py``, which builds ``labextension/`` into ``det_jupyter/labextension/`` with
``scripts/build_labextension.sh`` when that build is missing or older than its sources (Node >= 20
and npm needed then; ``jupyter-builder`` comes from the build requirements), and ``install_data``,
which installs the build under ``share/jupyter/labextensions/det-jupyter``, where JupyterLab finds
prebuilt extensions: installing the wheel needs no Node, and an editable install gets the sidebar
too (``EditableWheel`` installs data files in editable mode; ``jupyter-config/`` enables the
server extension the same way). An editable install copies the build: after editing
labextension/, reinstall, or run ``scripts/build_labextension.sh --develop`` once (a link).

``DET_JUPYTER_SKIP_LABEXTENSION=1`` builds without the sidebar (a warning, not an error), for a
machine with no Node that needs only the master.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

try:  # setuptools has no install_data of its own: distutils' (setuptools' vendored copy)
    from setuptools.command.install_data import install_data
except ImportError:
    from distutils.command.install_data import install_data

ROOT = Path(__file__).resolve().parent
SOURCE = ROOT / "labextension"
BUILT = ROOT / "det_jupyter" / "labextension"
TARGET = "share/jupyter/labextensions/det-jupyter"
_SOURCES = ("src", "style", "package.json", "package-lock.json", "install.json", "tsconfig.json")


def _newest_source() -> float:
    newest = 0.0
    for name in _SOURCES:
        path = SOURCE / name
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        for f in files:
            if f.exists():
                newest = max(newest, f.stat().st_mtime)
    return newest


def _built_mtime() -> float | None:
    marker = BUILT / "package.json"
    return marker.stat().st_mtime if marker.is_file() else None


def ensure_labextension() -> None:
    """Build the sidebar unless an up-to-date build is there (see the module's doc)."""
    built = _built_mtime()
    if not (SOURCE / "package.json").is_file():  # an sdist without the sources: use what it has
        return
    if built is not None and built >= _newest_source():
        return
    if os.environ.get("DET_JUPYTER_SKIP_LABEXTENSION") == "1":
        print(
            "det-jupyter: DET_JUPYTER_SKIP_LABEXTENSION=1: building without the JupyterLab sidebar",
            file=sys.stderr,
        )
        return
    if shutil.which("npm") is None:
        if built is not None:
            print(
                "det-jupyter: npm not found; using the existing, older build of the JupyterLab "
                "sidebar (det_jupyter/labextension)",
                file=sys.stderr,
            )
            return
        raise SystemExit(
            "det-jupyter: building the package builds its JupyterLab sidebar, which needs Node.js "
            ">= 20 and npm (not found on PATH). Install them, or install a built wheel, or set "
            "DET_JUPYTER_SKIP_LABEXTENSION=1 to build without the sidebar."
        )
    env = dict(os.environ)
    builder = shutil.which("jupyter-builder") or str(
        Path(sys.executable).parent / "jupyter-builder"
    )
    env.setdefault("JUPYTER_BUILDER", builder)
    print(f"det-jupyter: building the JupyterLab sidebar ({SOURCE})", file=sys.stderr)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_labextension.sh")], cwd=ROOT, env=env, check=False
    )
    if done.returncode != 0:
        raise SystemExit(
            f"det-jupyter: scripts/build_labextension.sh failed (exit "
            f"{done.returncode}); its output is above"
        )


def labextension_data_files() -> list[tuple[str, list[str]]]:
    """The build as data files, directory by directory (relative to the project root)."""
    if _built_mtime() is None:
        return []
    found: dict[str, list[str]] = {}
    for path in sorted(BUILT.rglob("*")):
        if path.is_file():
            rel = path.relative_to(BUILT)
            target = "/".join([TARGET, *rel.parent.parts])
            found.setdefault(target, []).append(str(path.relative_to(ROOT)))
    return sorted(found.items())


class BuildPy(build_py):
    def run(self) -> None:
        ensure_labextension()
        super().run()


class InstallData(install_data):
    def run(self) -> None:
        ensure_labextension()  # already done by build_py, unless only this command runs
        self.data_files = [*(self.data_files or []), *labextension_data_files()]
        super().run()


class EditableWheel(editable_wheel):
    """setuptools means to install data files in editable mode too, but asks the distribution
    for ``has_data`` (its method is ``has_data_files``) and so never does: without this, an
    editable install would have neither the sidebar nor the server extension's config."""

    def _run_install(self, category: str) -> None:
        if category == "data" and not hasattr(self.distribution, "has_data"):
            if self.distribution.has_data_files():
                self.run_command("install_data")
            return
        super()._run_install(category)


setup(cmdclass={"build_py": BuildPy, "install_data": InstallData, "editable_wheel": EditableWheel})
