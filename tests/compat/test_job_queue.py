"""The stock client reads the job queue: ``det job list`` and ``v1GetJobsV2Response``."""

from __future__ import annotations

import json

import pytest

from tests._master import ADMIN_PASSWORD, MasterProcess, create_experiment, wait_for

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}


def _two_jobs_one_placed(queue: dict) -> dict | None:
    placed = sum(j["full"]["allocatedSlots"] for j in queue["jobs"])
    return queue if len(queue["jobs"]) == 2 and placed == 1 else None


def test_det_job_list_shows_scheduled_and_queued_jobs(det_env, master: MasterProcess) -> None:
    client = master.admin()
    running = create_experiment(client, f.steps_config(det_env.python, name="runs", length=1000,
                                                       hparams={"sleep": 0.05}), f.STEPS_DIR)
    waiting = create_experiment(client, f.steps_config(det_env.python, name="waits",
                                                       resources={"slots_per_trial": 4}), f.STEPS_DIR)
    queue = wait_for(lambda: _two_jobs_one_placed(client.get("/api/v1/job-queues-v2")),
                     what="two jobs in the queue, one placed")
    det_env.check_shape("v1GetJobsV2Response", queue)

    res = det_env.det(["job", "list"], master.url, **ADMIN)
    assert res.returncode == 0, res.stderr
    rows = {line.split("|")[1].strip(): line for line in res.stdout.splitlines() if line.count("|") >= 8}
    job_a, job_b = running["experiment"]["jobId"], waiting["experiment"]["jobId"]
    assert "TYPE_EXPERIMENT" in rows[job_a] and "STATE_SCHEDULED" in rows[job_a], res.stdout
    assert "0/4" in rows[job_b] and "STATE_QUEUED" in rows[job_b], res.stdout

    res = det_env.det(["job", "list", "--json"], master.url, **ADMIN)
    assert res.returncode == 0, res.stderr
    listed = json.loads(res.stdout)["jobs"]
    assert [j["jobId"] for j in listed] == [job_a, job_b]
    assert [j["summary"] for j in listed] == [{"state": "STATE_SCHEDULED", "jobsAhead": 0},
                                              {"state": "STATE_QUEUED", "jobsAhead": 1}]
