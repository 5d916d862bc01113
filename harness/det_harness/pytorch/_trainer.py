"""``Trainer.fit()``: the training loop of a ``PyTorchTrial``.

Each batch: ``train_batch``, then the periods that end at this batch (report, validate,
checkpoint), then the preemption question (every rank asks it at every batch, so a pause,
preemption or searcher stop is obeyed at the next batch boundary on all workers at once).

A checkpoint holds the wrapped models, optimizers and LR schedulers, every worker's RNG state
and the trainer's state: batches trained (which is the data position, see ``_data``), the last
validation and checkpoint, the best metric, and each worker's training metrics not yet reported.
So a run resumed from any checkpoint, taken at any batch, reports the same metrics at the same
steps as a run that was never interrupted.
"""

from __future__ import annotations

import json
import logging
import math
import pathlib
import random
import sys
from typing import Any

import torch

from ._context import LRScheduler, PyTorchTrialContext
from ._data import TrainingBatches, full_validation_loader, validation_batches
from ._trial import PyTorchTrial, defines
from .units import (
    Batch,
    TrainUnit,
    at_boundary,
    length_in_batches,
    progress_in_units,
    searcher_unit,
)

logger = logging.getLogger("det_harness")

STATE_FILE = "state_dict.pth"
TRAINER_FILE = "trainer_state.json"
FORMAT = "det_harness.pytorch/1"
POLICIES = ("best", "all", "none")


class Trainer:
    """Runs a ``PyTorchTrial`` made with ``context`` (from ``det_harness.pytorch.init()``)."""

    def __init__(self, trial: PyTorchTrial, context: PyTorchTrialContext) -> None:
        if not isinstance(trial, PyTorchTrial):
            raise TypeError(f"Trainer takes a PyTorchTrial, not {type(trial).__name__}")
        self._trial = trial
        self._context = context

    def fit(self, checkpoint_period: TrainUnit | None = None,
            validation_period: TrainUnit | None = None,
            max_length: TrainUnit | None = None,
            reporting_period: TrainUnit = Batch(100),  # noqa: B008 (immutable)
            checkpoint_policy: str = "best",
            latest_checkpoint: str | None = None,
            step_zero_validation: bool = False,
            test_mode: bool = False,
            profiling_enabled: bool = False) -> None:
        """Train to ``max_length`` (a ``Batch`` or ``Epoch``; on a cluster it defaults to the
        searcher's ``max_length``, or ``max_time`` in ``time_metric`` batches or epochs),
        validating every ``validation_period``, checkpointing every ``checkpoint_period`` and
        after validations as ``checkpoint_policy`` says (``best``, ``all``, ``none``), reporting
        averaged training metrics every ``reporting_period``. Always ends with a validation and
        a checkpoint of the final state. ``latest_checkpoint`` resumes (on a cluster: the trial's
        latest checkpoint by default). ``test_mode`` trains one batch, validates and checkpoints.
        Returns early, after a checkpoint, when the master preempts, pauses or stops the trial.
        """
        if checkpoint_policy not in POLICIES:
            raise ValueError(f"checkpoint_policy must be one of {POLICIES}, got "
                             f"{checkpoint_policy!r}")
        for name, unit in (("checkpoint_period", checkpoint_period),
                           ("validation_period", validation_period),
                           ("max_length", max_length), ("reporting_period", reporting_period)):
            if unit is not None and not isinstance(unit, TrainUnit):
                raise TypeError(f"{name} must be a pytorch.Batch or pytorch.Epoch, got {unit!r}")
        if profiling_enabled:
            logger.warning("det_harness: profiling_enabled is not supported and is ignored")
        info = self._context.core.info
        on_cluster = info is not None and info.trial is not None
        if latest_checkpoint is None and on_cluster:
            latest_checkpoint = info.latest_checkpoint
        _Run(self._trial, self._context, on_cluster=on_cluster, max_length=max_length,
             periods={"validate": validation_period, "checkpoint": checkpoint_period,
                      "report": reporting_period},
             policy=checkpoint_policy, step_zero_validation=step_zero_validation,
             test_mode=test_mode).run(latest_checkpoint)


def _as_float(value: Any, key: str) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"metric {key!r} is a tensor of {value.numel()} values; "
                             "return one number per metric")
        return float(value.detach().item())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"metric {key!r} must be a number or a one-element tensor, got "
                    f"{type(value).__name__}")


def batch_metrics(out: Any, method: str) -> dict[str, float]:
    """What ``train_batch``/``evaluate_batch`` returned, as ``{name: float}``."""
    if isinstance(out, torch.Tensor):
        return {"loss": _as_float(out, "loss")}
    if not isinstance(out, dict):
        raise TypeError(f"{method} must return a dict of metrics (or a loss tensor), got "
                        f"{type(out).__name__}")
    return {str(k): _as_float(v, k) for k, v in out.items()}


def mean_metrics(parts: list[tuple[dict[str, float], dict[str, int]]]) -> dict[str, float]:
    """Combine ``(sums, counts)`` pairs (one per worker) into per-metric means."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for s, c in parts:
        for k, v in s.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + c[k]
    return {k: sums[k] / counts[k] for k in sums if counts[k]}


def sums_counts(rows: list[dict[str, float]]) -> tuple[dict[str, float], dict[str, int]]:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for k, v in row.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
    return sums, counts


def rng_state() -> dict[str, Any]:
    """This process's RNG states (numpy's only if numpy is already imported)."""
    state: dict[str, Any] = {"random": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    np = sys.modules.get("numpy")
    if np is not None:
        state["numpy"] = np.random.get_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["random"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])


class _Run:
    """One call of ``fit()``: the loop and its state."""

    def __init__(self, trial: PyTorchTrial, ctx: PyTorchTrialContext, *, on_cluster: bool,
                 max_length: TrainUnit | None, periods: dict[str, TrainUnit | None],
                 policy: str, step_zero_validation: bool, test_mode: bool) -> None:
        self.trial, self.ctx, self.core = trial, ctx, ctx.core
        self.dist = ctx.distributed
        self.rank, self.size = self.dist.get_rank(), self.dist.get_size()
        self.chief = self.rank == 0
        self.on_cluster = on_cluster
        config = ctx._exp_conf or {}
        searcher = config.get("searcher") or {}
        self.metric_name: str | None = searcher.get("metric")
        self.smaller_is_better = bool(searcher.get("smaller_is_better", True))
        self.periods, self.policy = periods, policy
        self.step_zero_validation, self.test_mode = step_zero_validation, test_mode

        self.stream = TrainingBatches(trial.build_training_data_loader(), seed=ctx.get_trial_seed(),
                                      world_size=self.size, rank=self.rank)
        self.epoch_len = self.stream.epoch_len
        ctx._epoch_len = self.epoch_len
        self.val_loader = trial.build_validation_data_loader()
        self.full_eval = defines(trial, "evaluate_full_dataset")
        if not self.full_eval and not defines(trial, "evaluate_batch"):
            raise NotImplementedError(f"{type(trial).__name__} must define evaluate_batch() or "
                                      "evaluate_full_dataset()")

        if max_length is None and on_cluster:
            gbs = ctx.get_hparams().get("global_batch_size")
            max_length = searcher_unit(config, gbs if isinstance(gbs, int) else None)
        if max_length is None:
            where = ("the experiment config's searcher has no max_length or max_time"
                     if on_cluster else "off-cluster there is no searcher")
            raise ValueError(f"{where}: pass max_length= (e.g. pytorch.Epoch(1)) to Trainer.fit()")
        self.unit = max_length
        self.length = 1 if test_mode else length_in_batches(max_length, self.epoch_len)

        # Trainer state (also what a checkpoint holds, see _checkpoint/_restore).
        self.batches = 0
        self.last_validation = -1
        self.last_checkpoint = -1
        self.best: float | None = None
        self.last_metric: float | None = None
        self.pending: list[dict[str, float]] = []

    # -- the loop -----------------------------------------------------------------------------

    def run(self, latest_checkpoint: str | None) -> None:
        if latest_checkpoint:
            self._restore(latest_checkpoint)
        for model in self.ctx.models:
            model.train()
        if self.step_zero_validation and self.batches == 0 and self.last_validation < 0:
            self._validate()
        stopped = False
        if self.batches < self.length:
            for index, batch in self.stream.iterate(self.batches):
                self._train_one(index, batch)
                if self.batches >= self.length:
                    break
                if self._should_stop():
                    stopped = True
                    break
                if self.batches >= self.length:  # the trial asked to stop (set_stop_requested)
                    break
        if stopped:
            if self.last_checkpoint != self.batches:
                self._checkpoint()
            logger.info("det_harness: stopping at batch %d (preempted, paused or stopped by the "
                        "searcher); resumes from checkpoint if scheduled again", self.batches)
            print(f"det_harness.pytorch: stopped at batch {self.batches}", flush=True)
            return
        self._report_training()
        if self.last_validation != self.batches:
            self._validate()
        if self.last_checkpoint != self.batches:
            self._checkpoint()
        if self.chief:
            self.core.train.report_progress(1.0)
        print(f"det_harness.pytorch: trained {self.batches} batches", flush=True)

    def _train_one(self, index: int, batch: Any) -> None:
        epoch_idx, in_epoch = divmod(index, self.epoch_len)
        self.ctx._batch_idx = index
        out = self.trial.train_batch(self.ctx.to_device(batch), epoch_idx, index)
        self.pending.append(batch_metrics(out, "train_batch"))
        self.batches = index + 1
        self.ctx._step_schedulers(LRScheduler.StepMode.STEP_EVERY_BATCH, self.batches)
        if in_epoch == self.epoch_len - 1:
            self.ctx._step_schedulers(LRScheduler.StepMode.STEP_EVERY_EPOCH, epoch_idx + 1)
        b, epl = self.batches, self.epoch_len
        if at_boundary(self.periods["report"], b, epl):
            self._report_training()
        if at_boundary(self.periods["validate"], b, epl) and b < self.length:
            self._validate()
        if at_boundary(self.periods["checkpoint"], b, epl) and b < self.length \
                and self.last_checkpoint != b:
            self._checkpoint()

    def _should_stop(self) -> bool:
        # A collective in a distributed job: every rank asks at every batch.
        preempt = self.core.preempt.should_preempt()
        if preempt:
            return True
        if self.ctx.get_stop_requested():
            self.length = self.batches  # finish here, as if the length were reached
        return False

    # -- metrics ------------------------------------------------------------------------------

    def _report_training(self) -> None:
        parts = self.dist.allgather(sums_counts(self.pending))
        self.pending = []
        if not self.chief or not any(c for _, c in parts):
            return
        metrics = mean_metrics(parts)
        metrics.setdefault("batches", self.batches)
        metrics.setdefault("epochs", self.batches / self.epoch_len)
        self.core.train.report_training_metrics(steps_completed=self.batches, metrics=metrics)
        self.core.train.report_progress(
            min(1.0, progress_in_units(self.unit, self.batches, self.epoch_len)
                / max(progress_in_units(self.unit, self.length, self.epoch_len), 1e-12)))

    def _validate(self) -> None:
        for model in self.ctx.models:
            model.eval()
        ddp = [m for m in self.ctx.models if isinstance(m, torch.nn.parallel.DistributedDataParallel)]
        for m in ddp:  # no buffer broadcast: workers may see different numbers of batches
            m.broadcast_buffers = False
        try:
            with torch.no_grad():
                metrics = self._evaluate()
        finally:
            for m in ddp:
                m.broadcast_buffers = True
            for model in self.ctx.models:
                model.train()
        metrics.setdefault("batches", self.batches)
        metrics.setdefault("epochs", self.batches / self.epoch_len)
        self.last_validation = self.batches
        metric = self._searcher_metric(metrics)
        if self.chief:
            self.core.train.report_validation_metrics(steps_completed=self.batches, metrics=metrics)
        if self.on_cluster and self.chief:  # off-cluster the local train context prints them
            shown = ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()
                              if k not in ("batches", "epochs"))
            print(f"det_harness.pytorch: validation at batch {self.batches}: {shown}", flush=True)
        improved = metric is not None and (
            self.best is None or (metric < self.best if self.smaller_is_better else metric > self.best))
        if improved:
            self.best = metric
        if self.batches > 0 and self.last_checkpoint != self.batches and self.batches < self.length \
                and (self.policy == "all" or (self.policy == "best" and (improved or metric is None))):
            self._checkpoint()

    def _evaluate(self) -> dict[str, float]:
        if self.full_eval:
            out = None
            if self.chief:
                out = batch_metrics(self.trial.evaluate_full_dataset(
                    full_validation_loader(self.val_loader)), "evaluate_full_dataset")
            return dict(self.dist.broadcast(out))
        rows = []
        for i, batch in enumerate(validation_batches(self.val_loader, world_size=self.size,
                                                     rank=self.rank)):
            rows.append(batch_metrics(self.trial.evaluate_batch(self.ctx.to_device(batch),
                                                                i * self.size + self.rank),
                                      "evaluate_batch"))
        metrics = mean_metrics(self.dist.allgather(sums_counts(rows)))
        if not metrics:
            raise ValueError("the validation data loader yielded no batches")
        return metrics

    def _searcher_metric(self, metrics: dict[str, float]) -> float | None:
        if self.metric_name is None:
            return None
        if self.metric_name not in metrics:
            raise KeyError(f"the searcher's metric {self.metric_name!r} is not among the validation "
                           f"metrics {sorted(metrics)}; return it from evaluate_batch or "
                           "evaluate_full_dataset")
        value = metrics[self.metric_name]
        self.last_metric = value
        return value if math.isfinite(value) else None

    # -- checkpoints --------------------------------------------------------------------------

    def _trainer_state(self) -> dict[str, Any]:
        return {"format": FORMAT, "batches": self.batches, "epoch_len": self.epoch_len,
                "last_validation": self.last_validation, "best": self.best,
                "last_metric": self.last_metric, "world_size": self.size}

    def _checkpoint(self) -> None:
        # Every rank's RNG state and unreported metrics go in; only the chief writes.
        per_rank = self.dist.gather({"rng": rng_state(), "pending": self.pending})
        self.last_checkpoint = self.batches
        if not self.chief:
            return
        state = {**self.ctx._state(), "rng_state": [p["rng"] for p in per_rank],
                 "pending": [p["pending"] for p in per_rank], "trainer": self._trainer_state()}
        metadata = {"steps_completed": self.batches, "format": FORMAT,
                    "framework": f"torch-{torch.__version__}"}
        with self.core.checkpoint.store_path(metadata) as (path, uuid):
            torch.save(state, pathlib.Path(path) / STATE_FILE)
            (pathlib.Path(path) / TRAINER_FILE).write_text(json.dumps(self._trainer_state(), indent=1))
        print(f"det_harness.pytorch: checkpoint {uuid} at batch {self.batches}", flush=True)

    def _restore(self, storage_id: str) -> None:
        with self.core.checkpoint.restore_path(storage_id) as path:
            file = pathlib.Path(path) / STATE_FILE
            if not file.exists():
                raise FileNotFoundError(f"checkpoint {storage_id} has no {STATE_FILE}: it was not "
                                        "written by det_harness.pytorch's Trainer")
            # Our own file, written by _checkpoint above (RNG states are not plain tensors).
            state = torch.load(file, map_location="cpu", weights_only=False)
        trainer = state["trainer"]
        if trainer.get("format") != FORMAT:
            raise ValueError(f"checkpoint {storage_id} has format {trainer.get('format')!r}, "
                             f"expected {FORMAT}")
        self.ctx._load_state(state)
        self.batches = int(trainer["batches"])
        self.last_validation = int(trainer["last_validation"])
        self.last_checkpoint = self.batches
        self.best = trainer["best"]
        self.last_metric = trainer["last_metric"]
        same_world = len(state["rng_state"]) == self.size
        rank = self.rank if same_world else 0
        set_rng_state(state["rng_state"][rank] if rank < len(state["rng_state"]) else
                      state["rng_state"][0])
        if same_world:
            self.pending = list(state["pending"][self.rank])
        else:  # another world size: the chief carries all unreported rows
            self.pending = [row for part in state["pending"] for row in part] if self.chief else []
        if trainer.get("epoch_len") != self.epoch_len:
            logger.warning("det_harness: the epoch had %s batches when checkpointed and has %d "
                           "now; the data position is only approximate",
                           trainer.get("epoch_len"), self.epoch_len)
        print(f"det_harness.pytorch: resumed from checkpoint {storage_id} at batch {self.batches}",
              flush=True)
