"""The Trainer off-cluster (as in a notebook cell): exact resume from a checkpoint taken mid-epoch
and mid-reporting-period, a stop signal obeyed at the next batch, LR schedulers, checkpoint
policies, InvalidHP, and the errors a user sees. The preemption double is named and passed in
the way the cluster's would be; everything else is the real harness."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'det-jupyter[examples]')")

import det_harness  # noqa: E402
from det_harness import pytorch  # noqa: E402
from torch import nn  # noqa: E402

HP = {"lr": 0.1, "global_batch_size": 8}


def dataset(n: int, seed: int) -> torch.utils.data.TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=gen)
    return torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))


class Toy(pytorch.PyTorchTrial):
    """Dropout makes the loss depend on the RNG; StepLR on the scheduler's state."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.3), nn.Linear(16, 1)))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=context.get_hparam("lr")))
        context.wrap_lr_scheduler(torch.optim.lr_scheduler.StepLR(self.opt, 1, gamma=0.5),
                                  pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH)
        self.trained: list[int] = []

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(40, 1), batch_size=self.context.get_per_slot_batch_size(),
                                  shuffle=True)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(dataset(16, 2), batch_size=8)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.trained.append(batch_idx)
        x, y = batch
        loss = nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss, "lr": self.opt.param_groups[0]["lr"]}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        return {"validation_loss": nn.functional.mse_loss(self.model(x), y)}


class PreemptAfterCalls(det_harness.core.LocalPreemptContext):
    """The master's preemption signal, seen at the ``n``-th question (after batch ``n``)."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def should_preempt(self, auto_ack: bool = True) -> bool:
        self.calls += 1
        return self.calls >= self.n


def fit(tmp_path: pathlib.Path, *, preempt_after: int | None = None, trial_cls: type = Toy,
        hparams: dict | None = None, exp_conf: dict | None = None,
        **kwargs: Any) -> tuple[list[dict], Any]:
    """One fit() off-cluster; returns (the reports, the trial)."""
    with pytorch.init(hparams=hparams or HP, seed=5, exp_conf=exp_conf,
                      checkpoint_storage=tmp_path / "ckpt") as ctx:
        if preempt_after is not None:
            ctx.core.preempt = PreemptAfterCalls(preempt_after)
        trial = trial_cls(ctx)
        kwargs.setdefault("max_length", pytorch.Batch(20))
        pytorch.Trainer(trial, ctx).fit(**kwargs)
        return ctx.core.train.history, trial


def curve(history: list[dict], group: str = "training") -> dict[int, dict]:
    return {h["steps_completed"]: h["metrics"].get("avgMetrics", h["metrics"])
            for h in history if h["group"] == group}


def checkpoints(tmp_path: pathlib.Path) -> dict[int, str]:
    out = {}
    for d in (tmp_path / "ckpt").iterdir():
        if (d / "metadata.json").exists():
            out[json.loads((d / "metadata.json").read_text())["steps_completed"]] = d.name
    return out


def test_resume_mid_epoch_and_mid_report_period_is_exact(tmp_path: pathlib.Path) -> None:
    periods = {"reporting_period": pytorch.Batch(4), "validation_period": pytorch.Batch(10),
               "checkpoint_period": pytorch.Batch(10)}
    full, _ = fit(tmp_path / "a", **periods)
    # Preempted after batch 13: epoch 2 of 5-batch epochs, one batch into a reporting period.
    first, t1 = fit(tmp_path / "b", preempt_after=13, **periods)
    assert t1.trained == list(range(13))
    ckpt = checkpoints(tmp_path / "b")
    assert sorted(ckpt) == [10, 13]
    second, t2 = fit(tmp_path / "b", latest_checkpoint=ckpt[13], **periods)
    assert t2.trained == list(range(13, 20))
    resumed = {**curve(first), **curve(second)}
    assert sorted(resumed) == sorted(curve(full)) == [4, 8, 12, 16, 20]
    for step, metrics in curve(full).items():
        assert resumed[step]["loss"] == pytest.approx(metrics["loss"], rel=1e-6, abs=1e-9), step
        assert resumed[step]["lr"] == metrics["lr"]
    assert curve(full, "validation") == {**curve(first, "validation"), **curve(second, "validation")}


def test_stop_signal_is_obeyed_at_the_next_batch(tmp_path: pathlib.Path) -> None:
    history, trial = fit(tmp_path, preempt_after=7, reporting_period=pytorch.Batch(100))
    assert trial.trained == list(range(7))
    assert sorted(checkpoints(tmp_path)) == [7]
    assert not curve(history)  # unreported metrics travel in the checkpoint, not as a report


def test_lr_scheduler_steps_every_epoch(tmp_path: pathlib.Path) -> None:
    history, _ = fit(tmp_path, reporting_period=pytorch.Batch(1), max_length=pytorch.Epoch(3))
    lrs = [m["lr"] for _, m in sorted(curve(history).items())]
    assert lrs == [0.1] * 5 + [0.05] * 5 + [0.025] * 5
    assert sorted(curve(history, "validation")) == [15]  # only the final validation


def test_checkpoint_policies(tmp_path: pathlib.Path) -> None:
    conf = {"searcher": {"metric": "validation_loss", "smaller_is_better": True}}
    fit(tmp_path / "all", exp_conf=conf, validation_period=pytorch.Batch(5), checkpoint_policy="all")
    assert sorted(checkpoints(tmp_path / "all")) == [5, 10, 15, 20]
    fit(tmp_path / "none", exp_conf=conf, validation_period=pytorch.Batch(5), checkpoint_policy="none")
    assert sorted(checkpoints(tmp_path / "none")) == [20]
    history, _ = fit(tmp_path / "best", exp_conf=conf, validation_period=pytorch.Batch(5))
    losses = curve(history, "validation")
    best = [s for s in sorted(losses) if s < 20 and losses[s]["validation_loss"] ==
            min(losses[t]["validation_loss"] for t in losses if t <= s)]
    assert sorted(checkpoints(tmp_path / "best")) == [*best, 20]


def test_checkpoint_holds_the_trainer_state(tmp_path: pathlib.Path) -> None:
    fit(tmp_path, max_length=pytorch.Batch(6))
    [uuid] = checkpoints(tmp_path).values()
    state = json.loads((tmp_path / "ckpt" / uuid / "trainer_state.json").read_text())
    assert state["batches"] == 6 and state["epoch_len"] == 5 and state["last_validation"] == 6
    saved = torch.load(tmp_path / "ckpt" / uuid / "state_dict.pth", weights_only=False)
    assert set(saved) >= {"models_state_dict", "optimizers_state_dict", "lr_schedulers_state_dict",
                          "rng_state", "pending", "trainer"}


class FullSet(Toy):
    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:  # not used
        raise AssertionError("evaluate_full_dataset wins")

    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        n = sum(len(x) for x, _ in data_loader)
        return {"validation_loss": 1.0, "examples": n}


def test_evaluate_full_dataset(tmp_path: pathlib.Path) -> None:
    history, _ = fit(tmp_path, trial_cls=FullSet, max_length=pytorch.Batch(2))
    assert curve(history, "validation")[2]["examples"] == 16


class BadHP(Toy):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        raise det_harness.InvalidHP("lr too large")


def test_invalid_hp_exits_zero_and_says_why(tmp_path: pathlib.Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        fit(tmp_path, trial_cls=BadHP)
    assert exit_info.value.code == 0


class NoEval(Toy):
    evaluate_batch = pytorch.PyTorchTrial.evaluate_batch


@pytest.mark.parametrize("kwargs,error,match", [
    ({"max_length": None}, ValueError, "pass max_length="),
    ({"checkpoint_policy": "sometimes"}, ValueError, "checkpoint_policy must be one of"),
    ({"validation_period": 5}, TypeError, "pytorch.Batch or pytorch.Epoch"),
    ({"trial_cls": NoEval}, NotImplementedError, "evaluate_batch"),
    ({"exp_conf": {"searcher": {"metric": "accuracy"}}}, KeyError, "not among the validation"),
    ({"hparams": {"lr": 0.1}}, ValueError, "global_batch_size"),
])
def test_errors_name_the_problem(tmp_path: pathlib.Path, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        fit(tmp_path, **kwargs)
