"""Every response a finished stock-client experiment touches parses with the stock bindings."""

from __future__ import annotations

import pytest

from tests._master import Client, MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat


def _finished_trial(client: Client, det_env) -> tuple[int, int]:
    """(experiment id, trial id) of a completed 10-step experiment with validations + checkpoints."""
    config = f.steps_config(det_env.python, name="shapes", length=10)
    exp_id = create_experiment(client, config, f.STEPS_DIR)["experiment"]["id"]
    assert f.wait_state(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"},
                        timeout=60) == "STATE_COMPLETED"
    [t] = f.trials(client, exp_id)
    return exp_id, t["id"]


def test_experiment_and_trial_io_responses_parse(det_env, master: MasterProcess) -> None:
    client = master.admin()
    exp_id, tid = _finished_trial(client, det_env)
    logs = client.get(f"/api/v1/trials/{tid}/logs?follow=false")
    assert isinstance(logs, list) and logs, logs
    assert all(line.keys() == {"result"} for line in logs), logs
    workloads = client.get(f"/api/v1/trials/{tid}/workloads")
    assert {k for w in workloads["workloads"] for k in w} == {"training", "validation", "checkpoint"}
    checkpoints = client.get(f"/api/v1/trials/{tid}/checkpoints")
    assert len(checkpoints["checkpoints"]) == 2
    items = [
        ("v1GetExperimentResponse", client.get(f"/api/v1/experiments/{exp_id}")),
        ("v1GetExperimentsResponse", client.get("/api/v1/experiments")),
        ("v1GetTrialWorkloadsResponse", workloads),
        ("v1GetTrialCheckpointsResponse", checkpoints),
        ("v1GetMasterResponse", client.get("/api/v1/master")),
        ("v1GetMeResponse", client.get("/api/v1/me")),
        *[("v1TrialLogsResponse", line["result"]) for line in logs],
    ]
    det_env.check_shapes(items)


def test_trial_responses_parse_after_validation(det_env, master: MasterProcess) -> None:
    client = master.admin()
    exp_id, tid = _finished_trial(client, det_env)
    det_env.check_shapes([
        ("v1GetExperimentTrialsResponse", client.get(f"/api/v1/experiments/{exp_id}/trials")),
        ("v1GetTrialResponse", client.get(f"/api/v1/trials/{tid}")),
        ("v1CompareTrialsResponse", client.get(
            f"/api/v1/trials/time-series?trialIds={tid}&metricIds=training.loss&metricIds=validation.vloss"
            "&maxDatapoints=5")),
    ])


@pytest.mark.parametrize(("path", "type_name"), [
    ("/api/v1/agents", "v1GetAgentsResponse"),
    ("/api/v1/resource-pools", "v1GetResourcePoolsResponse"),
    ("/api/v1/k8s-resource-managers", "v1GetKubernetesResourceManagersResponse"),
])
def test_cluster_responses_parse(det_env, master: MasterProcess, path: str, type_name: str) -> None:
    det_env.check_shape(type_name, master.admin().get(path))
