"""``det_harness.pytorch.init()``: the ``PyTorchTrialContext`` on a cluster or off it."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import torch

from .. import core as det_core
from ..info import get_cluster_info
from ._context import PyTorchTrialContext


def set_random_seeds(seed: int) -> None:
    """Seed Python's, torch's (and numpy's, when it is installed) RNGs, as Determined does."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:
        return
    np.random.seed(seed % (2**32))


def _device(local_rank: int) -> torch.device:
    if torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "x") != "":
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


@contextlib.contextmanager
def init(*, hparams: dict[str, Any] | None = None, exp_conf: dict[str, Any] | None = None,
         distributed: Any = None, seed: int | None = None, checkpoint_storage: Any = None,
         **_ignored: Any) -> Iterator[PyTorchTrialContext]:
    """The context a ``PyTorchTrial`` is built with; ``Trainer`` calls must happen inside it.

    On a cluster: the trial's hyperparameters, config and seed; with several workers (launched
    by ``det_harness.launch.torch_distributed``) torch.distributed is initialised (gloo, or NCCL
    on GPUs) and models are wrapped in DDP. Off-cluster (e.g. a notebook cell): ``hparams``,
    ``exp_conf`` and ``seed`` (default: not seeded) are yours, metrics are printed and kept in
    ``context.core.train.history``, and checkpoints go to ``checkpoint_storage`` (a directory;
    default ``~/.local/share/det_harness/checkpoints``).
    """
    info = get_cluster_info()
    on_cluster = info is not None and info.trial is not None
    created_group = False
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if distributed is None and world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            backend = "nccl" if _device(0).type == "cuda" else "gloo"
            dist.init_process_group(backend=backend)
            created_group = True
        distributed = det_core.DistributedContext.from_torch_distributed()
    if on_cluster:
        assert info is not None and info.trial is not None
        hparams, exp_conf, seed = dict(info.trial.hparams), info.trial.config, info.trial.trial_seed
    if seed is not None:
        set_random_seeds(int(seed))
    try:
        with det_core.init(distributed=distributed, hparams=hparams,
                           checkpoint_storage=checkpoint_storage) as core_context:
            local_rank = core_context.distributed.get_local_rank()
            yield PyTorchTrialContext(core_context, hparams=dict(hparams or {}), exp_conf=exp_conf,
                                      trial_seed=int(seed or 0), device=_device(local_rank))
    finally:
        if created_group:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
