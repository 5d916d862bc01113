"""det-jupyter: a deep-learning training platform inside Jupyter.

The master is a jupyter-server extension (``det_jupyter.app.DetJupyterApp``); in IPython,
``%load_ext det_jupyter`` adds the ``%det`` and ``%%det_experiment`` magics.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

__all__ = ["__version__", "load_ipython_extension"]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    import os

    if os.environ.get("DET_TASK_TYPE"):
        # A JupyterLab running as a det task (a notebook, a JupyterHub server) is not a master:
        # never start one there. It relays the sidebar's det calls to its master instead.
        return [{"module": "det_jupyter.tasks.lab_relay"}]
    from .app import DetJupyterApp

    return [{"module": "det_jupyter.app", "app": DetJupyterApp}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext det_jupyter``: register the magics (IPython is imported only here)."""
    from .magics import load_ipython_extension as load

    load(ipython)
