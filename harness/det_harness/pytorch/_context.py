"""``PyTorchTrialContext``: what a ``PyTorchTrial`` is given. It wraps models (to the device, and
in ``DistributedDataParallel`` when there are several workers), optimizers and LR schedulers so the
trainer can step, checkpoint and restore them, and it answers the trial's questions
(hyperparameters, batch sizes, ids)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

logger = logging.getLogger("det_harness")


class LRScheduler:
    """Determined's ``pytorch.LRScheduler``: when the trainer steps a wrapped scheduler."""

    class StepMode(enum.Enum):
        STEP_EVERY_EPOCH = 1
        STEP_EVERY_BATCH = 2
        MANUAL_STEP = 3
        STEP_EVERY_OPTIMIZER_STEP = 4

    def __init__(self, scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1) -> None:
        if not isinstance(step_mode, LRScheduler.StepMode):
            raise TypeError(f"step_mode must be an LRScheduler.StepMode, got {step_mode!r}")
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
            raise ValueError(f"frequency must be an int >= 1, got {frequency!r}")
        self.scheduler = scheduler
        self.step_mode = step_mode
        self.frequency = frequency


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


class PyTorchTrialContext:
    """Made by ``det_harness.pytorch.init()``; holds the Core API context as ``core``."""

    def __init__(self, core: Any, *, hparams: dict[str, Any], exp_conf: dict[str, Any] | None,
                 trial_seed: int, device: torch.device) -> None:
        self._core = core
        self._hparams = dict(hparams)
        self._exp_conf = exp_conf
        self._trial_seed = trial_seed
        self.device = device
        self.models: list[nn.Module] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_schedulers: list[LRScheduler] = []
        self._batch_idx = 0
        self._epoch_len: int | None = None
        self._stop_requested = False
        self._optimizer_steps = 0

    # -- what the trial asks ------------------------------------------------------------------

    @property
    def distributed(self) -> Any:
        """The Core API's ``DistributedContext`` (rank, size, collectives)."""
        return self._core.distributed

    @property
    def core(self) -> Any:
        """The Core API context (``train``, ``checkpoint``, ``preempt``, ``searcher``, …)."""
        return self._core

    def get_hparams(self) -> dict[str, Any]:
        """The trial's hyperparameters."""
        return dict(self._hparams)

    def get_hparam(self, name: str) -> Any:
        """One hyperparameter; a ``KeyError`` names the ones that exist."""
        if name not in self._hparams:
            raise KeyError(f"no hyperparameter {name!r}; the trial has {sorted(self._hparams)}")
        return self._hparams[name]

    def get_experiment_config(self) -> dict[str, Any]:
        """The experiment config (on cluster, or as given to ``init(exp_conf=…)``)."""
        if self._exp_conf is None:
            raise RuntimeError("no experiment config off-cluster; pass exp_conf= to pytorch.init()")
        return self._exp_conf

    def get_data_config(self) -> dict[str, Any]:
        """The config's ``data`` section ({} when unset)."""
        return dict((self._exp_conf or {}).get("data") or {})

    def get_trial_seed(self) -> int:
        return self._trial_seed

    def get_trial_id(self) -> int:
        info = self._core.info
        if info is None or info.trial is None:
            raise RuntimeError("get_trial_id() is only available on a cluster")
        return info.trial.trial_id

    def get_experiment_id(self) -> int:
        info = self._core.info
        if info is None or info.trial is None:
            raise RuntimeError("get_experiment_id() is only available on a cluster")
        return info.trial.experiment_id

    def get_global_batch_size(self) -> int:
        """The ``global_batch_size`` hyperparameter: one batch across all workers."""
        value = self._hparams.get("global_batch_size")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("set the hyperparameter global_batch_size (an int >= 1) to use "
                             f"get_global_batch_size()/get_per_slot_batch_size(); got {value!r}")
        return value

    def get_per_slot_batch_size(self) -> int:
        """``global_batch_size`` divided by the number of workers."""
        size = self.distributed.get_size()
        per_slot, rest = divmod(self.get_global_batch_size(), size)
        if per_slot < 1:
            raise ValueError(f"global_batch_size {self.get_global_batch_size()} is smaller than "
                             f"the {size} workers; raise it")
        if rest:
            logger.warning("det_harness: global_batch_size %d is not a multiple of %d workers; "
                           "each takes %d", self.get_global_batch_size(), size, per_slot)
        return per_slot

    def current_train_batch(self) -> int:
        """The index (0-based, global) of the batch being trained."""
        return self._batch_idx

    def is_epoch_start(self) -> bool:
        return self._epoch_len is not None and self._batch_idx % self._epoch_len == 0

    def is_epoch_end(self) -> bool:
        return self._epoch_len is not None and (self._batch_idx + 1) % self._epoch_len == 0

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the trainer to checkpoint and end the trial after this batch (as COMPLETED)."""
        self._stop_requested = bool(stop_requested)

    def get_stop_requested(self) -> bool:
        return self._stop_requested

    # -- wrapping -----------------------------------------------------------------------------

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Move ``model`` to the device; with several workers wrap it in
        ``DistributedDataParallel`` (gradients are averaged in ``backward``)."""
        if not isinstance(model, nn.Module):
            raise TypeError(f"wrap_model takes a torch.nn.Module, not {type(model).__name__}")
        model = model.to(self.device)
        if self.distributed.get_size() > 1:
            import torch.distributed as dist

            if not dist.is_initialized():
                raise RuntimeError("several workers but torch.distributed is not initialised; "
                                   "create the context with det_harness.pytorch.init()")
            ids = [self.device.index] if self.device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        self.models.append(model)
        return model

    def wrap_optimizer(self, optimizer: torch.optim.Optimizer, **_: Any) -> torch.optim.Optimizer:
        """Register ``optimizer`` so checkpoints hold its state."""
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"wrap_optimizer takes a torch.optim.Optimizer, not "
                            f"{type(optimizer).__name__}")
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(self, lr_scheduler: Any, step_mode: LRScheduler.StepMode,
                          frequency: int = 1) -> Any:
        """Register an LR scheduler, stepped by the trainer as ``step_mode`` says."""
        self.lr_schedulers.append(LRScheduler(lr_scheduler, step_mode, frequency))
        return lr_scheduler

    # -- in train_batch -----------------------------------------------------------------------

    def backward(self, loss: torch.Tensor, retain_graph: bool = False,
                 create_graph: bool = False) -> None:
        """``loss.backward()`` (gradients are averaged across workers by DDP)."""
        loss.backward(retain_graph=retain_graph, create_graph=create_graph)

    def step_optimizer(self, optimizer: torch.optim.Optimizer,
                       clip_grads: Callable[[Iterator[torch.Tensor]], None] | None = None,
                       auto_zero_grads: bool = True) -> None:
        """Clip (``clip_grads(params)``), step and zero the gradients of ``optimizer``."""
        if optimizer not in self.optimizers:
            raise ValueError("step_optimizer() takes an optimizer returned by wrap_optimizer()")
        if clip_grads is not None:
            clip_grads(p for group in optimizer.param_groups for p in group["params"])
        optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad(set_to_none=True)
        self._optimizer_steps += 1
        for s in self.lr_schedulers:
            if s.step_mode is LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP and \
                    self._optimizer_steps % s.frequency == 0:
                s.scheduler.step()

    def to_device(self, data: Any) -> Any:
        """``data`` (tensors in lists, tuples and dicts) moved to the trial's device."""
        if isinstance(data, torch.Tensor):
            return data.to(self.device)
        if isinstance(data, dict):
            return {k: self.to_device(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)) and not hasattr(data, "_fields"):
            return type(data)(self.to_device(v) for v in data)
        return data

    # -- for the trainer ----------------------------------------------------------------------

    def _step_schedulers(self, mode: LRScheduler.StepMode, count: int) -> None:
        for s in self.lr_schedulers:
            if s.step_mode is mode and count % s.frequency == 0:
                s.scheduler.step()

    def _state(self) -> dict[str, Any]:
        return {
            "models_state_dict": [_unwrap(m).state_dict() for m in self.models],
            "optimizers_state_dict": [o.state_dict() for o in self.optimizers],
            "lr_schedulers_state_dict": [s.scheduler.state_dict() for s in self.lr_schedulers],
            "optimizer_steps": self._optimizer_steps,
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        for key, ours in (("models_state_dict", self.models),
                          ("optimizers_state_dict", self.optimizers),
                          ("lr_schedulers_state_dict", self.lr_schedulers)):
            if len(state.get(key, [])) != len(ours):
                raise RuntimeError(f"the checkpoint has {len(state.get(key, []))} {key.split('_')[0]}"
                                   f" but the trial wrapped {len(ours)}; a checkpoint resumes "
                                   "only the trial code that wrote it")
        for model, sd in zip(self.models, state["models_state_dict"], strict=True):
            _unwrap(model).load_state_dict(sd)
        for opt, sd in zip(self.optimizers, state["optimizers_state_dict"], strict=True):
            opt.load_state_dict(sd)
        for sched, sd in zip(self.lr_schedulers, state["lr_schedulers_state_dict"], strict=True):
            sched.scheduler.load_state_dict(sd)
        self._optimizer_steps = int(state.get("optimizer_steps", 0))
