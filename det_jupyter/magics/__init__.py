"""IPython magics: ``%det …`` and ``%%det_experiment``.

    %load_ext det_jupyter           # or loaded by default: see docs/notebooks.md
    %det e list                     # the live experiments widget
    %det e describe 3               # the live experiment widget
    %det e create config.yaml .     # submit; returns the experiment widget
    %det job list                   # the job-queue widget
    %det agent list                 # the cluster widget
    %det model list                 # the model-registry widget (model describe NAME: chosen)
    %det master info                # anything else prints what the CLI prints

    %%det_experiment --name demo --searcher random --max-trials 4 --config hp
    import det_harness as det
    with det.core.init() as core:
        ...
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    from ._magics import DetMagics

    ipython.register_magics(DetMagics)
