"""Issue 27, warm start: ``searcher.source_trial_id`` and ``searcher.source_checkpoint_uuid``
start every trial of a new experiment from the source checkpoint (the stock Core API trial
restores it and resumes at its step), a source that has no checkpoint is refused with a 400
naming the key, and a user who may not read the source gets a 404."""

from __future__ import annotations

import pytest
import yaml

from tests._master import ApiError, Client, MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


def _finished(client, config: str) -> tuple[int, dict]:
    exp_id = create_experiment(client, config, f.STEPS_DIR)["experiment"]["id"]
    trial = f.only_trial(client, exp_id)
    assert f.wait_state(client, exp_id, TERMINAL, timeout=90) == "STATE_COMPLETED"
    return exp_id, f.trial(client, trial["id"])


def test_a_warm_started_trial_resumes_at_the_source_checkpoint(det_env, any_master: MasterProcess) -> None:
    client = any_master.admin()
    _, source = _finished(client, f.steps_config(det_env.python, name="source", length=10,
                                                 checkpoint_storage={"save_trial_latest": 2}))
    ckpts = sorted(f.checkpoints(client, source["id"]), key=lambda c: c["metadata"]["steps_completed"])
    assert [c["metadata"]["steps_completed"] for c in ckpts] == [5, 10]

    for key, value, resumed in (("source_trial_id", source["id"], 10),  # its latest checkpoint
                                ("source_checkpoint_uuid", ckpts[0]["uuid"], 5)):
        config = yaml.safe_load(f.steps_config(det_env.python, name=f"warm-{key}", length=15))
        config["searcher"][key] = value
        _, warm = _finished(client, yaml.safe_dump(config))
        log = f.log_text(client, warm["id"])
        assert f"RESUMED-FROM {resumed}" in log, log[-2000:]
        steps = f.steps_of(client, warm["id"], "training")
        assert steps == list(range(resumed + 1, 16)), steps

    # a source with no checkpoint, or none at all: 400 naming the key; nothing is created
    before = client.get("/api/v1/experiments")["pagination"]["total"]
    for key, value, words in (("source_checkpoint_uuid", "00000000-0000-0000-0000-000000000000", "not found"),
                              ("source_trial_id", 999_999, "not found")):
        config = yaml.safe_load(f.steps_config(det_env.python, name="warm-bad"))
        config["searcher"][key] = value
        with pytest.raises(ApiError) as err:
            create_experiment(client, yaml.safe_dump(config), f.STEPS_DIR)
        assert err.value.status in (400, 404) and (key in err.value.body["message"] or words
                                                   in err.value.body["message"]), err.value.body
    assert client.get("/api/v1/experiments")["pagination"]["total"] == before


def test_warm_start_from_a_trial_the_user_cannot_see_is_not_found(det_env, master: MasterProcess) -> None:
    admin = master.admin()
    _, source = _finished(admin, f.steps_config(det_env.python, name="private-source", length=5))
    ws = admin.post("/api/v1/workspaces", {"name": "private"})["workspace"]["id"]
    proj = admin.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["project"]["id"]
    exp_id = source["experimentId"]
    admin.post(f"/api/v1/experiments/{exp_id}/move", {"destinationProjectId": proj, "experimentId": exp_id})
    admin.post("/api/v1/users", {"user": {"username": "other", "active": True}, "password": "Other-Passw0rd"})
    other = Client(master.url, master.login("other", "Other-Passw0rd"))
    config = yaml.safe_load(f.steps_config(det_env.python, name="stolen-start"))
    config["searcher"]["source_trial_id"] = source["id"]
    with pytest.raises(ApiError) as err:
        create_experiment(other, yaml.safe_dump(config), f.STEPS_DIR)
    assert err.value.status == 404, err.value.body
