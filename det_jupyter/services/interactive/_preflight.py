"""What a notebook or a TensorBoard needs in the Python its task runs, checked before it is
queued: a fresh install without JupyterLab (or TensorBoard) refuses ``det notebook start`` with a
400 naming the install command, instead of a task that exits with code 1 and says why only in
its log.

The master knows one task Python: the embedded agent's (``DetJupyterApp.task_python``, else the
master's own). The app registers it with the pool that agent serves (``register``); tasks bound
for other pools (agents elsewhere, with their own environments) are not checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field

from ...errors import InvalidRequest

#: kind -> (the module its task imports, what installs it)
NEEDS: dict[str, tuple[str, str]] = {
    "NOTEBOOK": ("jupyterlab", "pip install jupyterlab"),
    "TENSORBOARD": ("tensorboard", "pip install 'det-jupyter[tensorboard]'"),
}


def has_module(python: str, module: str) -> bool:
    """Whether ``python`` (an interpreter's path) can import ``module`` (found, not imported)."""
    # The same environment: its bin directory (a venv's python is a link to the base one,
    # so links are not resolved).
    if os.path.dirname(os.path.abspath(python)) == os.path.dirname(os.path.abspath(sys.executable)):
        import importlib.util

        return importlib.util.find_spec(module) is not None
    probe = (
        f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 3)"
    )
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return True  # cannot tell: the task says why, as before
    return done.returncode == 0


@dataclass
class Preflight:
    """The task Python per pool; an answer "installed" is kept (a package installed later is
    seen at the next start, one removed later is the task's to report)."""

    pythons: dict[str, str] = field(default_factory=dict)  # pool -> python3
    _found: set[tuple[str, str]] = field(default_factory=set)

    def register(self, pool: str, python: str) -> None:
        self.pythons[pool] = python

    def check(self, kind: str, pool: str) -> None:
        """InvalidRequest (400) when a ``kind`` task in ``pool`` would lack its package."""
        need = NEEDS.get(kind)
        python = self.pythons.get(pool)
        if need is None or python is None:
            return
        module, install = need
        if (python, module) in self._found:
            return
        if not has_module(python, module):
            what = "notebook" if kind == "NOTEBOOK" else kind.lower()
            raise InvalidRequest(
                f"a {what} needs the {module} package in the Python its task runs ({python}), "
                f"and it is not installed there: run `{os.path.dirname(python)}/{install}` "
                f"(or start the master with --task-python naming an environment that has it)"
            )
        self._found.add((python, module))
