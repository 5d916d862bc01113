"""The PyTorch Trial API on a real master and agent: a ``model_def:ToyTrial`` experiment runs to
completion; a trial SIGKILLed mid-epoch (from outside, as the OOM killer would), and one paused mid-epoch, resume at the same batch with
the same loss curve as an uninterrupted run of the same seed; an ASHA searcher stop ends a trial
at the next batch; a two-slot trial trains with gloo and writes one checkpoint."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
from pathlib import Path

import pytest
import yaml

from tests._master import Client, MasterProcess, create_experiment, wait_experiment, wait_for
from tests.integration._exp import trial_log_text, trials

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="torch is not installed (pip install 'det-jupyter[examples]')"),
]
FIXTURE = Path(__file__).parent / "fixtures" / "trial_api"
EPOCH = 8  # 256 training examples in batches of 32


def toy_config(**overrides: object) -> dict:
    hparams = {"lr": 0.05, "global_batch_size": 32}
    hparams.update(overrides.pop("hparams", {}))  # type: ignore[arg-type]
    cfg = {
        "name": "toy-trial", "entrypoint": "model_def:ToyTrial", "hyperparameters": hparams,
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 40}},
        "min_validation_period": {"batches": 10}, "min_checkpoint_period": {"batches": 10},
        "scheduling_unit": 1, "checkpoint_policy": "none", "max_restarts": 2,
        "reproducibility": {"experiment_seed": 7},
    }
    cfg.update(overrides)
    return cfg


def submit(client: Client, cfg: dict) -> int:
    return create_experiment(client, yaml.safe_dump(cfg), FIXTURE)["experiment"]["id"]


def only_trial(client: Client, exp_id: int) -> dict:
    [trial] = trials(client, exp_id)
    return trial


def losses(client: Client, trial_id: int) -> dict[int, float]:
    wl = client.get(f"/api/v1/trials/{trial_id}/workloads")["workloads"]
    return {w["training"]["totalBatches"]: w["training"]["metrics"]["avgMetrics"]["loss"]
            for w in wl if "training" in w}


def validations(client: Client, trial_id: int) -> dict[int, float]:
    wl = client.get(f"/api/v1/trials/{trial_id}/workloads")["workloads"]
    return {w["validation"]["totalBatches"]:
            w["validation"]["metrics"]["avgMetrics"]["validation_loss"]
            for w in wl if "validation" in w}


def finish(client: Client, exp_id: int, timeout: float = 240) -> dict:
    state = wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                            timeout=timeout)
    trial = only_trial(client, exp_id)
    assert state == "STATE_COMPLETED", trial_log_text(client, trial["id"])[-4000:]
    return trial


def processes_holding(path: Path) -> list[int]:
    """Host pids of the processes that have ``path`` open (read from /proc as root would)."""
    pids = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == str(path) for fd in fd_dir.iterdir()):
                pids.append(int(fd_dir.parent.name))
        except OSError:
            continue
    return pids


def test_trial_class_experiment_completes_and_resumes_exactly(master: MasterProcess,
                                                              task_shared_dir: Path) -> None:
    client = master.admin()
    plain = submit(client, toy_config())
    beacon = task_shared_dir / "beacon"  # the trial runs as an account that cannot enter tmp_path
    killed = submit(client, toy_config(hparams={"beacon": str(beacon), "sleep": 0.1}))

    ref = finish(client, plain)
    curve = losses(client, ref["id"])
    assert sorted(curve) == list(range(1, 41))  # scheduling_unit 1: a report per batch
    assert sorted(validations(client, ref["id"])) == [10, 20, 30, 40]
    ckpts = client.get(f"/api/v1/trials/{ref['id']}/checkpoints")["checkpoints"]
    assert sorted(c["metadata"]["steps_completed"] for c in ckpts) == [10, 20, 30, 40]
    assert {"state_dict.pth", "trainer_state.json"} <= set(ckpts[0]["resources"])
    assert curve[40] < curve[1]  # it learns

    # SIGKILLed from outside in epoch 3 (batches 17-24), after the checkpoint at batch 20: the
    # restart resumes from that checkpoint, mid-epoch, and the curve is the uninterrupted one.
    trial_id = wait_for(lambda: (trials(client, killed) or [{}])[0].get("id"), what="the trial")
    wait_for(lambda: max(losses(client, trial_id) or {0: 0}) >= 21, timeout=120,
             interval=0.02, what="batch 21 reported")
    [pid] = processes_holding(beacon)
    os.kill(pid, signal.SIGKILL)
    reached = max(losses(client, trial_id))
    assert reached < 30, "the kill came too late to land mid-epoch before the next checkpoint"
    trial = finish(client, killed)
    log = trial_log_text(client, trial["id"])
    assert re.search(r"resumed from checkpoint \S+ at batch 20", log), log[-3000:]
    assert trial["restarts"] == 1
    again = losses(client, trial["id"])
    assert sorted(again) == sorted(curve)
    for step in curve:
        assert again[step] == pytest.approx(curve[step], rel=1e-6), step
    assert validations(client, trial["id"]) == pytest.approx(validations(client, ref["id"]))


def test_paused_mid_epoch_resumes_at_the_same_batch(master: MasterProcess) -> None:
    client = master.admin()
    ref = submit(client, toy_config())
    paused = submit(client, toy_config(hparams={"sleep": 0.1}))
    trial_id = wait_for(lambda: (trials(client, paused) or [{}])[0].get("id"), what="the trial")
    # Pause somewhere in epoch 2 or 3, off every period boundary.
    wait_for(lambda: max(losses(client, trial_id) or {0: 0}) >= 11, timeout=120,
             what="batch 11 reported")
    client.post(f"/api/v1/experiments/{paused}/pause", {})
    wait_experiment(client, paused, {"STATE_PAUSED"}, timeout=60)
    # The trial saw the signal at its next batch, checkpointed there and exited.
    line = wait_for(lambda: re.search(r"stopped at batch (\d+)", trial_log_text(client, trial_id)),
                    timeout=60, what="the trial to stop")
    stop = int(line.group(1))
    assert 11 <= stop < 40, stop  # a checkpoint of its own, mid-epoch (batches take 100 ms)
    wait_for(lambda: stop in {c["metadata"]["steps_completed"] for c in
                              client.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]},
             what=f"the checkpoint at batch {stop}")
    client.post(f"/api/v1/experiments/{paused}/activate", {})

    ref_curve = losses(client, finish(client, ref)["id"])
    trial = finish(client, paused)
    log = trial_log_text(client, trial["id"])
    assert f"stopped at batch {stop}" in log and f"at batch {stop}\n" in log.split("resumed from")[1]
    again = losses(client, trial["id"])
    assert sorted(again) == sorted(ref_curve)
    for step in ref_curve:
        assert again[step] == pytest.approx(ref_curve[step], rel=1e-6), step


def test_searcher_stop_ends_the_trial_at_the_next_batch(master: MasterProcess) -> None:
    client = master.admin()
    # 8 trials, divisor 4: ASHA lets about a quarter past the rung at batch 16 and stops the
    # rest while they train on (batches take 100 ms, so a stop has 4.8 s to arrive).
    cfg = toy_config(
        hparams={"sleep": 0.1, "lr": {"type": "log", "base": 10, "minval": -3, "maxval": -0.5}},
        searcher={"name": "adaptive_asha", "metric": "validation_loss", "smaller_is_better": True,
                  "time_metric": "batches", "max_time": 64, "max_trials": 8, "max_rungs": 2,
                  "divisor": 4, "mode": "aggressive", "max_concurrent_trials": 2},
        min_validation_period={"batches": 16}, min_checkpoint_period={"batches": 0})
    exp_id = submit(client, cfg)
    wait_experiment(client, exp_id, {"STATE_COMPLETED"}, timeout=300)
    stopped = []
    for trial in trials(client, exp_id):
        log = trial_log_text(client, trial["id"])
        assert trial["state"] == "STATE_COMPLETED", log[-3000:]
        match = re.search(r"stopped at batch (\d+)", log)
        if match:
            at = int(match.group(1))
            stopped.append(at)
            # At or after its rung's validation at 16 (a stop decided before the trial's next
            # batch takes effect at 16 itself) and before the end; nothing trained after it:
            # the last reported batch is the one it stopped at, and its checkpoint is there.
            assert 16 <= at < 64, log[-2000:]
            assert max(losses(client, trial["id"])) == at
            ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
            assert at in {c["metadata"]["steps_completed"] for c in ckpts}
        else:
            assert "trained 64 batches" in log, log[-2000:]
    assert stopped, "ASHA stopped no trial"


def test_two_slot_trial_trains_with_gloo_and_checkpoints_once(master: MasterProcess) -> None:
    client = master.admin()
    cfg = toy_config(resources={"slots_per_trial": 2}, min_checkpoint_period={"batches": 0},
                     min_validation_period={"batches": 8},
                     searcher={"name": "single", "metric": "validation_loss",
                               "max_length": {"epochs": 2}})
    trial = finish(client, submit(client, cfg))
    log = trial_log_text(client, trial["id"])
    assert "worker 0 of 2, backend gloo" in log and "worker 1 of 2, backend gloo" in log, log[-3000:]
    # Two workers of 16 examples make a global batch of 32: still 8 batches an epoch, each
    # reported once, averaged over the workers by the chief.
    assert sorted(losses(client, trial["id"])) == list(range(1, 17))
    assert sorted(validations(client, trial["id"])) == [8, 16]
    ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert [c["metadata"]["steps_completed"] for c in ckpts] == [16]
    assert log.count("det_harness.pytorch: checkpoint ") == 1


def test_two_slot_trial_paused_mid_epoch_resumes_exactly(master: MasterProcess) -> None:
    client = master.admin()
    cfg = toy_config(resources={"slots_per_trial": 2}, min_checkpoint_period={"batches": 0},
                     min_validation_period={"batches": 8},
                     searcher={"name": "single", "metric": "validation_loss",
                               "max_length": {"batches": 24}})
    ref_curve = losses(client, finish(client, submit(client, cfg))["id"])
    cfg["hyperparameters"]["sleep"] = 0.1
    paused = submit(client, cfg)
    trial_id = wait_for(lambda: (trials(client, paused) or [{}])[0].get("id"), what="the trial")
    wait_for(lambda: max(losses(client, trial_id) or {0: 0}) >= 10, timeout=120,
             what="batch 10 reported")
    client.post(f"/api/v1/experiments/{paused}/pause", {})
    wait_experiment(client, paused, {"STATE_PAUSED"}, timeout=60)
    line = wait_for(lambda: re.search(r"stopped at batch (\d+)", trial_log_text(client, trial_id)),
                    timeout=60, what="the trial to stop")
    assert 10 <= int(line.group(1)) < 24  # both workers' RNG and unreported metrics are saved
    client.post(f"/api/v1/experiments/{paused}/activate", {})
    trial = finish(client, paused)
    again = losses(client, trial["id"])
    assert sorted(again) == sorted(ref_curve) == list(range(1, 25))
    for step in ref_curve:
        assert again[step] == pytest.approx(ref_curve[step], rel=1e-6), step


def test_script_entrypoint_takes_its_length_from_the_searcher(master: MasterProcess) -> None:
    client = master.admin()
    cfg = toy_config(entrypoint="python3 train_script.py",
                     searcher={"name": "single", "metric": "validation_loss",
                               "max_length": {"epochs": 3}})
    trial = finish(client, submit(client, cfg))
    assert sorted(validations(client, trial["id"])) == [EPOCH, 2 * EPOCH, 3 * EPOCH]
    assert sorted(losses(client, trial["id"])) == [4, 8, 12, 16, 20, 24]
    assert trial["totalBatchesProcessed"] == 3 * EPOCH


def test_invalid_hp_ends_the_trial_and_the_search_goes_on(master: MasterProcess) -> None:
    client = master.admin()
    cfg = toy_config(hparams={"lr": {"type": "categorical", "vals": [-1.0, 0.05]}},
                     searcher={"name": "grid", "metric": "validation_loss",
                               "max_length": {"batches": 8}, "max_concurrent_trials": 2})
    exp_id = submit(client, cfg)
    assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == \
        "STATE_COMPLETED"
    by_lr = {t["hparams"]["lr"]: t for t in trials(client, exp_id)}
    bad, good = by_lr[-1.0], by_lr[0.05]
    assert bad["state"] == "STATE_COMPLETED" and bad["restarts"] == 0  # exited 0, not retried
    assert "lr must be positive" in trial_log_text(client, bad["id"])
    assert not losses(client, bad["id"])
    assert good["state"] == "STATE_COMPLETED" and max(losses(client, good["id"])) == 8
