"""``python3 -m det_harness.exec.harness model_def:MyTrial``: run a Trial class on a cluster.

What an experiment whose entrypoint is ``module:Class`` runs (the master wraps it in
``det_harness.launch.torch_distributed`` when the trial has several slots). The class is imported
from the context directory (the working directory), built with ``det_harness.pytorch.init()``'s
context and trained by ``Trainer.fit()`` with the experiment config's settings:

- length: ``searcher.max_length`` (or ``max_time`` in ``time_metric`` batches or epochs);
- ``min_validation_period`` and ``min_checkpoint_period`` (``{batches|epochs|records: N}``);
- ``scheduling_unit`` (batches between training-metric reports, default 100);
- ``checkpoint_policy``, ``perform_initial_validation``, and the trial's latest checkpoint.

A class written against the stock ``determined`` package (``determined.pytorch.PyTorchTrial``),
in an interpreter that has it installed, is handed to that package's own runner
(``python3 -m determined.exec.harness``), as Determined 0.38.1 would run it.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

TRIAL_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_USAGE = "usage: python3 -m det_harness.exec.harness MODULE:TRIAL_CLASS"


def load_trial_class(spec: str, directory: str | None = None) -> type:
    """Import ``module:Class`` with ``directory`` (default: the working directory) on the path."""
    if not TRIAL_CLASS.match(spec):
        raise ValueError(f"{spec!r} is not MODULE:CLASS (e.g. model_def:MyTrial)")
    module_name, class_name = spec.split(":")
    path = os.path.abspath(directory or os.getcwd())
    if path not in sys.path:
        sys.path.insert(0, path)
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name, None)
    if cls is None:
        raise AttributeError(f"module {module_name!r} ({getattr(module, '__file__', '?')}) has no "
                             f"class {class_name!r}")
    return cls


def fit_arguments(config: dict[str, Any], hparams: dict[str, Any]) -> dict[str, Any]:
    """``Trainer.fit()``'s keyword arguments from an experiment config."""
    from ..pytorch import Batch
    from ..pytorch.units import unit_from_config

    gbs = hparams.get("global_batch_size")
    gbs = gbs if isinstance(gbs, int) and not isinstance(gbs, bool) else None
    return {
        "validation_period": unit_from_config(config.get("min_validation_period"),
                                              "min_validation_period", gbs),
        "checkpoint_period": unit_from_config(config.get("min_checkpoint_period"),
                                              "min_checkpoint_period", gbs),
        "reporting_period": Batch(int(config.get("scheduling_unit") or 100)),
        "checkpoint_policy": str(config.get("checkpoint_policy") or "best"),
        "step_zero_validation": bool(config.get("perform_initial_validation")),
    }


def is_stock_trial(trial_class: Any) -> bool:
    """Whether ``trial_class`` subclasses the stock ``determined.pytorch.PyTorchTrial`` (only
    looked up if the user's module already imported it)."""
    stock = sys.modules.get("determined.pytorch")
    base = getattr(stock, "PyTorchTrial", None)
    return isinstance(trial_class, type) and isinstance(base, type) and issubclass(trial_class, base)


def run(spec: str) -> None:
    """Build and train the Trial class named by ``spec`` (on a cluster)."""
    from .. import get_cluster_info, pytorch

    info = get_cluster_info()
    if info is None or info.trial is None:
        raise RuntimeError("det_harness.exec.harness runs inside a trial task; off-cluster, use "
                           "pytorch.init() and pytorch.Trainer(...).fit(max_length=...) yourself")
    trial_class = load_trial_class(spec)
    if not (isinstance(trial_class, type) and issubclass(trial_class, pytorch.PyTorchTrial)):
        if is_stock_trial(trial_class):
            # Written against the stock `determined` package, which this interpreter has: its
            # own Trial runner (same argv, same environment) speaks our master's protocol.
            sys.stdout.flush()
            os.execv(sys.executable, [sys.executable, "-m", "determined.exec.harness", spec])
        raise TypeError(f"{spec} is not a det_harness.pytorch.PyTorchTrial subclass (nor a "
                        "determined.pytorch.PyTorchTrial with the determined package installed)")
    kwargs = fit_arguments(info.trial.config, dict(info.trial.hparams))
    with pytorch.init() as context:
        trial = trial_class(context)
        pytorch.Trainer(trial, context).fit(**kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(_USAGE, file=sys.stderr)
        return 2
    run(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
