"""Issue 31: the stock ``determined==0.38.1`` package, unchanged, in Kubernetes pods (the test
bed of tests/_k8s.py): a Core API trial (tests/compat/fixtures/steps) completes in a Job with the
checkpoints the stock package writes through the shared_fs mount, and its metrics are the
master's; paused and activated, it resumes in a new pod from its checkpoint; a two-slot trial started by the stock ``determined.launch.torch_distributed`` runs as
two pods (``max_slots_per_pod: 1``) whose workers meet over gloo and shard one checkpoint.

The stock package comes from its own virtual environment (``DET_COMPAT_VENV``, default
``.venv-det``; tests/compat/_detenv.py): the experiment's ``bind_mounts`` lend that venv's
site-packages read-only into the pod (a ``hostPath`` volume), and its
``environment_variables`` put it on the task's PYTHONPATH, as a team would lend a shared
software tree; the task runs the pod's ``python3`` (the host's Debian /usr, lent by
tests/_k8s.py). This process never imports ``determined``.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import _k8s
from tests._k8s import Cluster
from tests._master import MasterProcess, create_experiment, wait_experiment
from tests.compat._detenv import DET_VERSION, DetEnvUnavailable, ensure_venv, venv_path
from tests.compat.fixtures import _flows as f
from tests.integration._exp import trial_log_text, trials

pytestmark = [pytest.mark.slow, pytest.mark.compat, pytest.mark.timeout(600)]

DDP_STOCK = Path(__file__).resolve().parents[1] / "compat" / "fixtures" / "ddp_stock"
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}
STOCK_SITE = "/opt/det-stock/site"  # where the pod sees the det venv's site-packages
# Printed by the pod before the trial starts: which `determined` it imports, and from where.
PROBE = ("python3 -c \"import determined; "
         "print('STOCK-DETERMINED', determined.__version__, determined.__file__)\"")


@pytest.fixture(scope="module")
def det_site() -> str:
    """The det venv's site-packages (skips, saying how to make the venv, without it)."""
    try:
        python = ensure_venv(venv_path(), create=False)
    except DetEnvUnavailable as e:
        pytest.skip(f"stock determined client unavailable: {e}")
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


@pytest.fixture(scope="module")
def master(k8s_cluster: Cluster, det_site: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """8 one-slot agents of a quarter CPU each: a two-slot trial is two pods."""
    work = tmp_path_factory.mktemp("k8s-compat")
    with _k8s.namespace(k8s_cluster) as ns, _k8s.k8s_master(
            k8s_cluster, work, ns, slot_resource_requests={"cpu": 0.25}, max_slots_per_pod=1) as m:
        yield m


def stock_config(det_site: str, *, name: str, entrypoint: str, **extra: Any) -> dict[str, Any]:
    """An experiment whose pods import the stock package lent from ``det_site``."""
    return {
        "name": name,
        "entrypoint": f"{PROBE} && {entrypoint}",
        "bind_mounts": [{"host_path": det_site, "container_path": STOCK_SITE, "read_only": True}],
        "environment": {"environment_variables": [f"PYTHONPATH={STOCK_SITE}"]},
        "max_restarts": 0,
        **extra,
    }


def test_a_stock_core_api_trial_completes_in_a_pod_with_checkpoints(master: MasterProcess, det_site: str) -> None:
    client = master.admin()
    cfg = stock_config(det_site, name="stock-in-k8s", entrypoint="python3 train.py",
                       hyperparameters={"x": 3, "every": 5, "sleep": 0.02},
                       searcher={"name": "single", "metric": "vloss", "smaller_is_better": True,
                                 "max_length": 10})
    exp_id = create_experiment(client, yaml.safe_dump(cfg), f.STEPS_DIR)["experiment"]["id"]
    state = wait_experiment(client, exp_id, TERMINAL, timeout=360)
    (trial,) = trials(client, exp_id)
    log = trial_log_text(client, trial["id"])
    assert state == "STATE_COMPLETED", log[-4000:]
    # The stock package, from the lent venv, ran the trial.
    assert f"STOCK-DETERMINED {DET_VERSION} {STOCK_SITE}/determined/__init__.py" in log, log[-4000:]
    assert f"TRIAL-DONE trial={trial['id']}" in log, log[-4000:]

    # Its metrics are the master's: loss 1/step at every step, vloss x/step at 5 and 10.
    assert f.steps_of(client, trial["id"], "training") == list(range(1, 11))
    work = f.workloads(client, trial["id"])
    vloss = {w["validation"]["totalBatches"]: w["validation"]["metrics"]["avgMetrics"]["vloss"]
             for w in work if "validation" in w}
    assert vloss == {5: pytest.approx(3 / 5), 10: pytest.approx(3 / 10)}
    got = f.trial(client, trial["id"])
    assert got["totalBatchesProcessed"] == 10
    assert got["latestValidation"]["metrics"]["avgMetrics"] == {"vloss": pytest.approx(0.3)}

    # Its checkpoints, written by the stock package through the shared_fs mount, are on the
    # master's storage with the steps they were taken at.
    ckpts = f.checkpoints(client, trial["id"])
    assert sorted(c["metadata"]["steps_completed"] for c in ckpts) == [5, 10], ckpts
    assert all(c["state"] == "STATE_COMPLETED" for c in ckpts), ckpts
    storage = f.experiment(client, exp_id)["config"]["checkpoint_storage"]
    for c in ckpts:
        assert "state.json" in c["resources"], c
        saved = json.loads((Path(storage["host_path"]) / c["uuid"] / "state.json").read_text())
        assert saved == {"step": c["metadata"]["steps_completed"], "trial_id": trial["id"]}


def test_a_paused_stock_trial_resumes_in_a_new_pod_from_its_checkpoint(master: MasterProcess, det_site: str) -> None:
    client = master.admin()
    cfg = stock_config(det_site, name="stock-pause-in-k8s", entrypoint="python3 train.py",
                       hyperparameters={"x": 2, "every": 5, "sleep": 0.1},
                       searcher={"name": "single", "metric": "vloss", "max_length": 40})
    exp_id = create_experiment(client, yaml.safe_dump(cfg), f.STEPS_DIR)["experiment"]["id"]
    tid = f.only_trial(client, exp_id, timeout=120)["id"]
    f.wait_log(client, tid, "CHECKPOINT step=5", timeout=240)
    client.post(f"/api/v1/experiments/{exp_id}/pause")
    assert f.wait_state(client, exp_id, {"STATE_PAUSED"}, timeout=120) == "STATE_PAUSED"
    client.post(f"/api/v1/experiments/{exp_id}/activate")
    state = f.wait_state(client, exp_id, TERMINAL, timeout=300)
    log = f.log_text(client, tid)
    assert state == "STATE_COMPLETED", log[-4000:]
    # Two runs (two Jobs); the second started from a checkpoint the first one's pod wrote.
    starts = re.findall(r"TRIAL-START trial=\d+ .* latest=(\S+)", log)
    assert len(starts) == 2 and starts[0] == "None", log[-4000:]
    by_uuid = {c["uuid"]: c["metadata"]["steps_completed"] for c in f.checkpoints(client, tid)}
    assert by_uuid.get(starts[1], 0) > 0 and f"RESUMED-FROM {by_uuid[starts[1]]}" in log, (by_uuid, log[-4000:])
    assert max(by_uuid.values()) == 40 and f.trial(client, tid)["totalBatchesProcessed"] == 40


def _stock_gang(client: Any, det_site: str, name: str, before: str) -> tuple[int, dict[str, Any], str]:
    """A two-slot trial of the ddp_stock fixture under the stock torch_distributed launcher
    (``before``: a command run first), run to the end: (experiment id, trial, its log)."""
    cfg = stock_config(det_site, name=name,
                       entrypoint=f"{before}python3 -m determined.launch.torch_distributed python3 train.py",
                       hyperparameters={}, searcher={"name": "single", "metric": "vloss", "max_length": 10},
                       resources={"slots_per_trial": 2})
    exp_id = create_experiment(client, yaml.safe_dump(cfg), DDP_STOCK)["experiment"]["id"]
    state = wait_experiment(client, exp_id, TERMINAL, timeout=420)
    (trial,) = trials(client, exp_id)
    log = trial_log_text(client, trial["id"])
    assert state == "STATE_COMPLETED", log[-4000:]
    return exp_id, trial, log


def test_a_stock_launcher_gang_trains_in_two_pods(master: MasterProcess, det_site: str) -> None:
    client = master.admin()
    exp_id, trial, log = _stock_gang(client, det_site, "stock-ddp-in-k8s", "")
    for rank in (0, 1):
        assert f"stock worker {rank} of 2: all_reduce 3.0 allgather [0, 1]" in log, log[-4000:]
    # One worker per pod: each rank's last line came from its own pod (agent ``<node>/<i>``).
    done = {e["result"]["rankId"]: e["result"]["agentId"] for e in client.get(f"/api/v1/trials/{trial['id']}/logs")
            if e["result"]["message"].strip() in ("stock worker 0 done", "stock worker 1 done")}
    assert sorted(done) == [0, 1] and done[0] != done[1], (done, log[-4000:])
    assert f.steps_of(client, trial["id"], "validation") == [5, 10]
    ckpts = f.checkpoints(client, trial["id"])
    assert sorted(c["metadata"]["steps_completed"] for c in ckpts) == [5, 10], ckpts
    latest = max(ckpts, key=lambda c: c["metadata"]["steps_completed"])
    # Each pod's worker wrote its shard; the stock package merged them into one checkpoint.
    assert {"rank-0.json", "rank-1.json"} <= set(latest["resources"]), latest
    root = Path(f.experiment(client, exp_id)["config"]["checkpoint_storage"]["host_path"]) / latest["uuid"]
    assert [json.loads((root / f"rank-{r}.json").read_text()) for r in (0, 1)] == [{"step": 10}] * 2


# 0.38.1's container entrypoint of a trial on Kubernetes, before the launcher: the rendezvous
# through the master's all-gather (DET_RESOURCES_TYPE=k8s-job), then the pod IP as the proxy
# address. Each pod then prints what it learned: its resources id, pod IP, resources type and
# the rendezvous file prep_container wrote.
PREP = ("python3 -m determined.exec.prep_container --rendezvous --proxy && "
        "echo \"PREP-RDV $DET_RESOURCES_ID $DET_KUBERNETES_POD_IP $DET_RESOURCES_TYPE "
        "$DET_KUBERNETES_JOB_PARALLELISM $(cat /run/determined/info/rendezvous.json)\"")


def test_a_stock_gang_meets_through_prep_container_then_trains(master: MasterProcess, det_site: str) -> None:
    client = master.admin()
    exp_id, trial, log = _stock_gang(client, det_site, "stock-prep-in-k8s", f"{PREP} && ")
    for rank in (0, 1):  # each pod's log is shipped as its pod ends: the last one may trail
        log = f.wait_log(client, trial["id"], f"stock worker {rank} done", timeout=60)
    # Both pods wrote a rendezvous file from the all-gather, and the files agree: the same
    # addresses (each pod's own IP at its own rank), one slot each, ranks 0 and 1.
    seen = re.findall(r"PREP-RDV (\S+) (\S+) (\S+) (\S+) (\{.*\})", log)
    assert len(seen) == 2 and {s[0] for s in seen} == {f"{seen[0][0].rpartition('.r')[0]}.r{i}" for i in (0, 1)}, log[-4000:]
    rdv = [json.loads(s[4]) for s in seen]
    assert all(s[2] == "k8s-job" and s[3] == "2" for s in seen), seen
    assert rdv[0]["container_addrs"] == rdv[1]["container_addrs"], rdv
    assert sorted(r["container_rank"] for r in rdv) == [0, 1], rdv
    assert all(r["container_slot_counts"] == [1, 1] for r in rdv), rdv
    for (_, pod_ip, *_), r in zip(seen, rdv, strict=True):
        assert pod_ip and r["container_addrs"][r["container_rank"]] == pod_ip, (seen, rdv)
    # Then the stock launcher trained on that rendezvous with both ranks.
    for rank in (0, 1):
        assert f"stock worker {rank} of 2: all_reduce 3.0 allgather [0, 1]" in log, log[-4000:]
    assert f.steps_of(client, trial["id"], "validation") == [5, 10]
    latest = max(f.checkpoints(client, trial["id"]), key=lambda c: c["metadata"]["steps_completed"])
    assert {"rank-0.json", "rank-1.json"} <= set(latest["resources"]), latest
