"""``PyTorchTrial``: the model and the data, written by the user; the ``Trainer`` runs the loop."""

from __future__ import annotations

from typing import Any

import torch

from ._context import PyTorchTrialContext


class PyTorchTrial:
    """Subclass this and write the methods below; ``Trainer.fit()`` (or the ``model_def:MyTrial``
    entrypoint) does the loop, validation, checkpoints, preemption and resume.

    ``__init__(self, context)`` builds the model(s), optimizer(s) and LR scheduler(s) and wraps
    them with ``context.wrap_model`` / ``wrap_optimizer`` / ``wrap_lr_scheduler`` (only wrapped
    objects are checkpointed). Define ``evaluate_batch`` or ``evaluate_full_dataset``.
    """

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context

    def build_training_data_loader(self) -> Any:
        """A ``det_harness.pytorch.DataLoader`` (exact resume, sharded) or a torch DataLoader."""
        raise NotImplementedError("a PyTorchTrial must define build_training_data_loader()")

    def build_validation_data_loader(self) -> Any:
        """The validation data, as for ``build_training_data_loader``."""
        raise NotImplementedError("a PyTorchTrial must define build_validation_data_loader()")

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int
                    ) -> dict[str, Any] | torch.Tensor:
        """Train on one batch (already on the device): forward, ``context.backward(loss)``,
        ``context.step_optimizer(opt)``. Return a dict of metrics (tensors or numbers), or the
        loss tensor alone (reported as ``loss``). ``batch_idx`` counts global batches from 0."""
        raise NotImplementedError("a PyTorchTrial must define train_batch()")

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        """Metrics of one validation batch; the trainer averages them over batches (and
        workers)."""
        raise NotImplementedError

    def evaluate_full_dataset(self, data_loader: torch.utils.data.DataLoader) -> dict[str, Any]:
        """Metrics over the whole validation set at once (for metrics that are not means of
        per-batch values). Runs on the chief only, with the whole data set."""
        raise NotImplementedError


def defines(trial: PyTorchTrial, method: str) -> bool:
    """Whether ``trial``'s class overrides ``method`` of ``PyTorchTrial``."""
    return getattr(type(trial), method, None) is not getattr(PyTorchTrial, method)
