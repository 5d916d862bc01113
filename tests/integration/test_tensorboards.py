"""TensorBoards on a real master and agent: TensorBoard as a task over a finished experiment's
stored metrics, reached only through the master's proxy. Its scalars API returns the trial's
``loss``; another user gets 404; it is culled when idle; ``det tensorboard start|list|kill``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess, wait_experiment, wait_for
from tests.integration import _notebooks as nbh
from tests.integration._exp import submit_counter, task_log_text, trials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
pytest.importorskip("tensorboard", reason="the tensorboard package: pip install -e .[tensorboard]")

DET = Path(sys.executable).parent / "det"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("tb") / "master", slots=2,
                      env={"DET_NOTEBOOK_IDLE_CHECK": "1"}).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def experiment(cluster: MasterProcess) -> tuple[int, int]:
    """A finished counter experiment: (experiment id, its trial id)."""
    client = cluster.admin()
    exp_id = submit_counter(client, length=6, sleep=0.01, ckpt_every=3)
    wait_experiment(client, exp_id, {"STATE_COMPLETED"})
    return exp_id, trials(client, exp_id)[0]["id"]


def state(client: Client, tb_id: str) -> str:
    return client.get(f"/api/v1/tensorboards/{tb_id}")["tensorboard"]["state"]


def launch(client: Client, **body: object) -> str:
    return client.post("/api/v1/tensorboards", body)["tensorboard"]["id"]


def wait_running(client: Client, tb_id: str) -> None:
    try:
        final = wait_for(lambda: (s := state(client, tb_id)) in ("STATE_RUNNING", "STATE_TERMINATED")
                         and s, timeout=120, what=f"tensorboard {tb_id} running")
        assert final == "STATE_RUNNING", f"tensorboard {tb_id} ended before it ran"
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- its logs:\n{task_log_text(client, tb_id)[-3000:]}") from None


@pytest.fixture(scope="module")
def board(cluster: MasterProcess, experiment: tuple[int, int]) -> str:
    client = cluster.admin()
    tb_id = launch(client, experimentIds=[experiment[0]])
    wait_running(client, tb_id)
    return tb_id


def test_tensorboard_serves_the_trials_scalars(cluster: MasterProcess, experiment: tuple[int, int],
                                                board: str) -> None:
    client = cluster.admin()
    exp_id, trial_id = experiment
    run = f"experiment_{exp_id}/trial_{trial_id}"
    tags = wait_for(lambda: client.get(f"/proxy/{board}/data/plugin/scalars/tags").get(run),
                    timeout=60, what=f"run {run} in TensorBoard")
    assert {"loss", "validation_loss"} <= set(tags)
    query = urllib.parse.urlencode({"run": run, "tag": "loss"})
    points = client.get(f"/proxy/{board}/data/plugin/scalars/scalars?{query}")
    assert [(step, round(value, 6)) for _wall, step, value in points] == [
        (s, round(1.0 / s, 6)) for s in range(1, 7)]
    # The REST shape: v1Tensorboard, listed, a job like any other.
    tb = client.get(f"/api/v1/tensorboards/{board}")["tensorboard"]
    assert tb["experimentIds"] == [exp_id] and tb["trialIds"] == []
    assert tb["serviceAddress"] == f"/proxy/{board}/" and tb["idleTimeout"] == 300.0
    assert board in {t["id"] for t in client.get("/api/v1/tensorboards")["tensorboards"]}
    jobs = client.get("/api/v1/job-queues-v2")["jobs"]
    assert any(j["full"]["type"] == "TYPE_TENSORBOARD" and j["full"]["entityId"] == board
               for j in jobs)
    moved = client.post(f"/api/v1/tensorboards/{board}/set_priority", {"priority": 10})
    assert moved["tensorboard"]["id"] == board
    job = next(j["full"] for j in client.get("/api/v1/job-queues-v2")["jobs"]
               if j["full"]["entityId"] == board)
    assert job["priority"] == 10


def test_other_users_get_404(cluster: MasterProcess, board: str) -> None:
    other = Client(cluster.url, cluster.login("determined", ADMIN_PASSWORD))
    for path in (f"/api/v1/tensorboards/{board}", f"/proxy/{board}/data/environment"):
        with pytest.raises(ApiError) as err:
            other.get(path)
        assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        other.post(f"/api/v1/tensorboards/{board}/kill")
    assert err.value.status == 404
    assert board not in {t["id"] for t in other.get("/api/v1/tensorboards")["tensorboards"]}
    with pytest.raises(ApiError) as err:
        Client(cluster.url).get(f"/proxy/{board}/data/environment")
    assert err.value.status == 404


def test_bad_requests_are_400_and_missing_ids_404(cluster: MasterProcess) -> None:
    client = cluster.admin()
    for body, status in (({}, 400), ({"experimentIds": ["x"]}, 400), ({"trialIds": 5}, 400),
                         ({"experimentIds": [987654]}, 404), ({"trialIds": [987654]}, 404)):
        with pytest.raises(ApiError) as err:
            client.post("/api/v1/tensorboards", body)
        assert err.value.status == status, (body, err.value.body)


def test_an_idle_tensorboard_is_culled(cluster: MasterProcess, experiment: tuple[int, int]) -> None:
    client = cluster.admin()
    tb_id = launch(client, trialIds=[experiment[1]], config={"idle_timeout": 3})
    wait_running(client, tb_id)
    ended = wait_for(lambda: (lambda t: t if t["state"] == "STATE_TERMINATED" else None)(
        client.get(f"/api/v1/tensorboards/{tb_id}")["tensorboard"]), timeout=60,
        what=f"tensorboard {tb_id} culled")
    assert ended["exitStatus"].startswith("culled: idle"), ended
    assert "no proxy traffic" in ended["exitStatus"]


def test_det_tensorboard_start_list_kill(cluster: MasterProcess, experiment: tuple[int, int],
                                         tmp_path: Path) -> None:
    if not DET.exists():
        pytest.skip(f"{DET} is missing: run pip install -e . to install the det console script")
    env = {k: v for k, v in os.environ.items() if k not in ("DET_USER", "DET_PASS")}
    env.update(DET_MASTER=cluster.url, DET_JUPYTER_CONFIG_DIR=str(tmp_path), DISPLAY="")

    def det(*argv: str, stdin: str | None = None) -> str:
        done = subprocess.run([str(DET), *argv], env=env, capture_output=True, text=True,
                              timeout=180, input=stdin)
        assert done.returncode == 0, f"det {' '.join(argv)}: {done.stderr}"
        assert "Traceback" not in done.stderr
        return done.stdout

    det("user", "login", "admin", stdin=ADMIN_PASSWORD + "\n")
    out = det("tensorboard", "start", "-t", str(experiment[1]), "--no-browser")
    match = re.search(r"TensorBoard (\S+) is running: (\S+)", out)
    assert match, out
    tb_id, url = match.groups()
    # The link names the proxy's own origin (another port of the master's host), not the master's.
    proxy = nbh.proxy_origin(cluster.admin(), tb_id, "tensorboard")
    assert proxy != cluster.url and url == f"{proxy}/proxy/{tb_id}/?det_ticket=" + url.split("det_ticket=")[1]
    listed = det("tensorboard", "list")
    assert tb_id in listed and str(experiment[1]) in listed
    assert det("tensorboard", "open", tb_id, "--no-browser").strip().startswith(url.split("?")[0])
    client = cluster.admin()
    proxied = nbh.proxy_client(client, tb_id, "tensorboard")
    assert proxied.get(f"/proxy/{tb_id}/data/environment")  # routed while it runs
    assert f"Killed TensorBoard {tb_id}" in det("tensorboard", "kill", tb_id)
    # The kill drops the route before it answers: the next request is refused with why (it is
    # stopping, or has ended), not sent on to a dying server ("not answering").
    with pytest.raises(ApiError) as refused:
        proxied.get(f"/proxy/{tb_id}/data/environment")
    assert refused.value.status in (503, 404), refused.value
    assert re.search(r"This tensorboard (is stopping|has ended)", str(refused.value.body)), refused.value
    wait_for(lambda: state(client, tb_id) == "STATE_TERMINATED", timeout=60,
             what=f"tensorboard {tb_id} killed")
    logs = det("tensorboard", "logs", tb_id).splitlines()
    assert logs and any("TensorBoard" in line for line in logs), logs
    assert det("tensorboard", "logs", tb_id, "--tail", "1").splitlines() == logs[-1:]


def test_the_tensorboards_token_reads_its_trials_only(cluster: MasterProcess,
                                                       experiment: tuple[int, int],
                                                       board: str) -> None:
    """The narrow grant: a TensorBoard's allocation token may GET its experiments' trials and
    their metrics, and nothing of another experiment; it may write nothing."""
    client = cluster.admin()
    other_exp = submit_counter(client, length=2, sleep=0.01)
    wait_experiment(client, other_exp, {"STATE_COMPLETED"})
    other_trial = trials(client, other_exp)[0]["id"]
    # The embedded agent keeps the task's /run/determined/info under its data dir.
    info = Path(cluster.data_dir) / "agent" / "tasks" / f"{board}.1" / "run" / "info" / "cluster.json"
    token = json.loads(info.read_text())["session_token"]
    task = Client(cluster.url, headers={"Grpc-Metadata-x-allocation-token": f"Bearer {token}"})
    exp_id, trial_id = experiment
    assert task.get(f"/api/v1/experiments/{exp_id}/trials")["trials"][0]["id"] == trial_id
    assert task.get(f"/api/v1/trials/{trial_id}/workloads")["workloads"]
    for path in (f"/api/v1/experiments/{other_exp}/trials", f"/api/v1/trials/{other_trial}",
                 f"/api/v1/trials/{other_trial}/workloads", f"/api/v1/experiments/{other_exp}"):
        with pytest.raises(ApiError) as err:
            task.get(path)
        assert err.value.status == 404, path
    with pytest.raises(ApiError) as err:
        task.post(f"/api/v1/trials/{trial_id}/metrics", {"metrics": {
            "trialId": trial_id, "trialRunId": 1, "stepsCompleted": 99,
            "metrics": {"avgMetrics": {"loss": 0.0}}, "group": "training"}})
    assert err.value.status == 404


def test_tensorboards_own_port_refuses_requests_without_the_upstream_token(
        cluster: MasterProcess, board: str) -> None:
    client = cluster.admin()
    match = re.search(r"TensorBoard \S+ at (http://\S+/)", task_log_text(client, board))
    assert match, task_log_text(client, board)[-2000:]
    direct = match.group(1) + "data/environment"
    for headers in ({}, {"Authorization": "token wrong"},
                    {"Authorization": f"Bearer {client.token}"}):
        with pytest.raises(ApiError) as err:
            Client(direct.rsplit("/proxy/", 1)[0], headers=headers).get(
                "/proxy/" + direct.rsplit("/proxy/", 1)[1])
        assert err.value.status == 403, headers


def test_a_running_trials_new_metrics_appear(cluster: MasterProcess) -> None:
    client = cluster.admin()
    exp_id = submit_counter(client, length=30, sleep=0.3, ckpt_every=10)
    tb_id = launch(client, experimentIds=[exp_id])
    wait_running(client, tb_id)
    run = None
    seen: list[int] = []

    def last_step() -> int:
        nonlocal run
        if run is None:
            run = next(iter(client.get(f"/proxy/{tb_id}/data/plugin/scalars/tags")), None)
            if run is None:
                return 0
        query = urllib.parse.urlencode({"run": run, "tag": "loss"})
        steps = [step for _w, step, _v in client.get(f"/proxy/{tb_id}/data/plugin/scalars/scalars?{query}")]
        seen.append(max(steps, default=0))
        return seen[-1]

    wait_for(lambda: last_step() == 30, timeout=120, interval=1.0, what="step 30 in TensorBoard")
    assert any(0 < s < 30 for s in seen), seen  # it grew while the trial ran
    client.post(f"/api/v1/tensorboards/{tb_id}/kill")
