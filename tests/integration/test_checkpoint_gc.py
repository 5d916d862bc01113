"""Checkpoint garbage collection against a real master and agent: what an ended experiment
keeps (``checkpoint_storage.save_*``), that a registered checkpoint and a live trial's latest
checkpoint survive, and users' deletes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests._master import (
    ApiError,
    Client,
    MasterProcess,
    create_experiment,
    wait_experiment,
    wait_for,
)
from tests.conftest import backend_db_url
from tests.integration._exp import COUNTER, counter_config, trial_log_text, trials


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def gc_master(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("gc") / "master", db_url=backend_db_url(request)).start()
    yield m
    m.stop()


def _submit(m: MasterProcess, policy: tuple[int, int, int], *, max_trials: int = 1, **hp: object) -> int:
    cfg = yaml.safe_load(counter_config(**hp))
    cfg["searcher"] = {"name": "random", "metric": "validation_loss", "max_trials": max_trials,
                       "max_length": {"batches": int(hp.get("length", 20))}}
    best, trial_best, latest = policy
    cfg["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(_root(m)),
                                 "save_experiment_best": best, "save_trial_best": trial_best,
                                 "save_trial_latest": latest}
    return create_experiment(m.admin(), yaml.safe_dump(cfg), COUNTER)["experiment"]["id"]


def _root(m: MasterProcess) -> Path:
    return m.data_dir / "checkpoints"


def _by_trial(client: Client, exp_id: int) -> dict[int, list[dict]]:
    """Each trial's checkpoints in step order."""
    out: dict[int, list[dict]] = {}
    for c in client.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]:
        out.setdefault(c["training"]["trialId"], []).append(c)
    return {t: sorted(cs, key=lambda c: c["metadata"]["steps_completed"]) for t, cs in out.items()}


def _states(ckpts: list[dict]) -> list[tuple[int, str]]:
    return [(c["metadata"]["steps_completed"], c["state"].removeprefix("STATE_")) for c in ckpts]


def _settled(client: Client, exp_id: int, want: dict[int, list[tuple[int, str]]] | None = None,
             ) -> dict[int, list[dict]]:
    """The checkpoints once GC has run (it runs on a worker after the end)."""
    def done() -> dict[int, list[dict]] | None:
        found = _by_trial(client, exp_id)
        states = {t: _states(cs) for t, cs in found.items()}
        return found if (want is None or states == want) else None
    return wait_for(done, timeout=30, what="checkpoint GC")


def test_latest_only_keeps_one_checkpoint_per_trial_and_removes_the_files(gc_master: MasterProcess) -> None:
    admin = gc_master.admin()
    exp_id = _submit(gc_master, (0, 0, 1), max_trials=2, length=15, ckpt_every=5, sleep=0.01)
    assert wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
    tids = [t["id"] for t in trials(admin, exp_id)]
    assert len(tids) == 2
    want = {t: [(5, "DELETED"), (10, "DELETED"), (15, "COMPLETED")] for t in tids}
    found = _settled(admin, exp_id, want)
    for ckpts in found.values():
        kept, gone = ckpts[-1], ckpts[:-1]
        assert (_root(gc_master) / kept["uuid"] / "state.json").is_file()
        for c in gone:
            assert not (_root(gc_master) / c["uuid"]).exists(), c["uuid"]


def test_a_registered_checkpoint_survives_gc(gc_master: MasterProcess) -> None:
    admin = gc_master.admin()
    exp_id = _submit(gc_master, (0, 0, 1), length=20, ckpt_every=5, sleep=0.15)
    first = wait_for(lambda: next(iter(_by_trial(admin, exp_id).values()), [None])[0], timeout=60,
                     what="the first checkpoint")
    admin.post("/api/v1/models", {"name": "keeper"})
    admin.post("/api/v1/models/keeper/versions", {"checkpointUuid": first["uuid"]})
    assert wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
    (tid,) = [t["id"] for t in trials(admin, exp_id)]
    _settled(admin, exp_id, {tid: [(5, "COMPLETED"), (10, "DELETED"), (15, "DELETED"), (20, "COMPLETED")]})
    assert (_root(gc_master) / first["uuid"] / "state.json").is_file()
    # Deleting the version leaves the checkpoint; a user may then delete it.
    admin.request("DELETE", "/api/v1/models/keeper/versions/1")
    admin.request("DELETE", "/api/v1/checkpoints", {"checkpointUuids": [first["uuid"]]})
    assert admin.get(f"/api/v1/checkpoints/{first['uuid']}")["checkpoint"]["state"] == "STATE_DELETED"
    wait_for(lambda: not (_root(gc_master) / first["uuid"]).exists(), timeout=30, what="files removed")
    admin.request("DELETE", "/api/v1/models/keeper")


def test_gc_never_deletes_the_latest_checkpoint_of_a_live_trial(gc_master: MasterProcess) -> None:
    """Two paused trials, policy "keep nothing": killing one ends it and collects the
    experiment; the other, still live, keeps exactly its latest checkpoint and resumes from it."""
    admin = gc_master.admin()
    exp_id = _submit(gc_master, (0, 0, 0), max_trials=2, length=400, ckpt_every=5, sleep=0.05)
    wait_for(lambda: (cs := _by_trial(admin, exp_id)) and len(cs) == 2 and all(len(c) >= 2 for c in cs.values()),
             timeout=90, what="two checkpoints in each trial")
    admin.post(f"/api/v1/experiments/{exp_id}/pause")
    wait_for(lambda: all(t["state"] == "STATE_PAUSED" for t in trials(admin, exp_id))
             and not _allocations(admin, exp_id),
             timeout=60, what="both trials paused with nothing running")
    victim, survivor = sorted(t["id"] for t in trials(admin, exp_id))
    latest = _by_trial(admin, exp_id)[survivor][-1]["uuid"]

    # A user may not delete it either.
    with pytest.raises(ApiError) as info:
        admin.request("DELETE", "/api/v1/checkpoints", {"checkpointUuids": [latest]})
    assert info.value.status == 409 and "still running" in str(info.value.body)

    admin.post(f"/api/v1/trials/{victim}/kill")

    def collected() -> bool:
        found = _by_trial(admin, exp_id)
        return all(c["state"] == "STATE_DELETED" for c in found[victim]) and \
            [c["uuid"] for c in found[survivor] if c["state"] != "STATE_DELETED"] == [latest]
    wait_for(collected, timeout=30, what="GC after the kill")
    assert (_root(gc_master) / latest / "state.json").is_file()

    steps = next(c["metadata"]["steps_completed"] for c in _by_trial(admin, exp_id)[survivor]
                 if c["uuid"] == latest)
    admin.post(f"/api/v1/experiments/{exp_id}/activate")
    wait_for(lambda: f"run 2 starting at step {steps}" in trial_log_text(admin, survivor), timeout=60,
             what="the live trial resumed from its latest checkpoint")
    admin.post(f"/api/v1/experiments/{exp_id}/kill")
    wait_experiment(admin, exp_id, {"STATE_CANCELED", "STATE_ERROR", "STATE_COMPLETED"})


def _allocations(client: Client, exp_id: int) -> list[dict]:
    """The experiment's live trial allocations (``GET /api/v1/tasks`` lists live ones)."""
    tasks = client.get("/api/v1/tasks").get("allocationIdToSummary") or {}
    return [a for a in tasks.values() if str(a.get("taskId", "")).startswith(f"{exp_id}.")]
