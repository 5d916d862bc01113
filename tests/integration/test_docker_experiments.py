"""Issue 29, end to end: a master whose embedded agent runs the Docker runtime (a private
daemon, tests/_docker.py) trains an experiment whose config names an image, in a container of
it; a config without one still runs as a process; what Docker could not run is refused at
submit with a 400.

The image is the registry-free skeleton (``det-skel:1``), with the host's /usr bound read-only
through the config's own ``bind_mounts``, so the trial runs Debian's python3 (not the master's
virtual environment) with the harness the agent binds in.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import _docker
from tests._docker import Engine
from tests._master import (
    ApiError,
    MasterProcess,
    bare_cluster,
    create_experiment,
    start_agent,
    wait_experiment,
    wait_for,
)
from tests.integration._exp import (
    COUNTER,
    counter_config,
    submit_counter,
    task_log_text,
    trial_log_text,
    trials,
)

DDP = Path(__file__).parent / "fixtures" / "ddp"

pytestmark = pytest.mark.slow

USR = [{"host_path": "/usr", "container_path": "/usr", "read_only": True}]


@pytest.fixture(scope="module")
def docker_master(docker_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = _docker.docker_master(docker_engine, tmp_path_factory.mktemp("docker") / "master")
    yield m
    m.stop()


def _in_image(engine: Engine, **hparams: object) -> str:
    import yaml

    cfg = yaml.safe_load(counter_config(whereami=True, **hparams))
    cfg["environment"] = {"image": engine.image}
    cfg["bind_mounts"] = USR
    return yaml.safe_dump(cfg)


def test_an_image_experiment_trains_in_a_container_and_restarts_from_its_checkpoint(
        docker_master: MasterProcess, docker_engine: Engine) -> None:
    client = docker_master.admin()
    exp_id = create_experiment(client, _in_image(docker_engine, length=10, crash_at=7, crash_runs="1"),
                               COUNTER)["experiment"]["id"]
    assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == "STATE_COMPLETED"
    (trial,) = trials(client, exp_id)
    log = trial_log_text(client, trial["id"])
    where = re.findall(r"WHEREAMI exe=(\S+) uid=(\d+) cwd=(\S+) harness=(\S+)", log)
    assert len(where) == 2, log  # two runs: the crash and the restart
    for exe, uid, cwd, harness in where:
        assert cwd == "/run/determined/workdir" and int(uid) != 0, log
        assert exe.startswith("/usr/bin/python3"), exe  # the image's (the host's /usr), not the master's venv
        assert harness == "/run/determined/harness/det_harness", harness  # bound in by the agent
    assert "WHEREAMI-STDERR" in log
    assert "crashing at step 7" in log and "run 2 starting at step 5" in log
    assert trial["restarts"] == 1 and trial["totalBatchesProcessed"] == 10
    ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert [c["metadata"]["steps_completed"] for c in ckpts if c["state"] == "STATE_COMPLETED"][-1] == 10
    # every container of the run is gone (removed once its exit was reported)
    left = docker_engine.api().containers(all=True, filters={"label": "ai.det-jupyter.allocation"})
    assert left == [], left


def test_without_an_image_it_is_a_process(docker_master: MasterProcess) -> None:
    client = docker_master.admin()
    exp_id = submit_counter(client, length=3, whereami=True)
    assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120) == "STATE_COMPLETED"
    log = trial_log_text(client, trials(client, exp_id)[0]["id"])
    (exe, harness) = re.findall(r"WHEREAMI exe=(\S+) .* harness=(\S+)", log)[0]
    assert harness != "/run/determined/harness/det_harness" and not exe.startswith("/usr/bin/"), log


@pytest.mark.parametrize(("patch", "words"), [
    ({"environment": {"image": "x:1", "add_capabilities": ["SYS_WIZARD"]}}, "unknown capability"),
    ({"bind_mounts": [{"host_path": "relative", "container_path": "/data"}]}, "absolute path"),
    ({"resources": {"shm_size": "plenty"}}, "not a size"),
])
def test_what_docker_could_not_run_is_a_400(docker_master: MasterProcess, patch: dict, words: str,
                                            tmp_path: Path) -> None:
    import yaml

    client = docker_master.admin()
    cfg = {**yaml.safe_load(counter_config(length=1)), **patch}
    before = client.get("/api/v1/experiments")["pagination"]["total"]
    with pytest.raises(ApiError) as err:
        create_experiment(client, yaml.safe_dump(cfg), COUNTER)
    assert err.value.status == 400 and words in str(err.value), str(err.value)
    assert client.get("/api/v1/experiments")["pagination"]["total"] == before


def _job_of(client: object, exp_id: int) -> dict:
    exp = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]  # type: ignore[attr-defined]
    jobs = client.get("/api/v1/job-queues-v2")["jobs"]  # type: ignore[attr-defined]
    return next(j["full"] for j in jobs if j["full"]["jobId"] == exp["jobId"])


def test_an_image_task_waits_for_an_agent_with_docker_and_says_why(
        docker_engine: Engine, tmp_path: Path) -> None:
    """Placement: with only a process agent in the pool, an image experiment queues with a
    wait reason naming the missing Docker engine (while a process experiment runs there); an
    agent with Docker joining runs it, in a container."""
    with bare_cluster(tmp_path) as (master, procs):
        client = master.admin()
        procs.append(start_agent(master, tmp_path, "plain", slots=1, extra=("--runtime", "process")))
        wait_for(lambda: len(client.get("/api/v1/agents")["agents"]) == 1, what="the process agent")
        img = create_experiment(client, _in_image(docker_engine, length=2), COUNTER)["experiment"]["id"]
        reason = wait_for(lambda: _job_of(client, img).get("waitReason"), what="a wait reason")
        assert reason == (
            "needs an agent with a Docker engine, and none of the 1 enabled agent of pool default "
            "has one (its config sets environment.image; start an agent on a host with Docker, "
            "or remove the image to run as a process)"), reason
        proc_exp = submit_counter(client, length=2)  # the slot it cannot use is not held for it
        assert wait_experiment(client, proc_exp, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120) == "STATE_COMPLETED"
        assert client.get(f"/api/v1/experiments/{img}")["experiment"]["state"] == "STATE_QUEUED"

        procs.append(_docker.docker_agent(master, docker_engine, tmp_path, "dock"))
        assert wait_experiment(client, img, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == "STATE_COMPLETED"
        log = trial_log_text(client, trials(client, img)[0]["id"])
        assert "harness=/run/determined/harness/det_harness" in log, log


def test_an_agent_restarted_within_the_reconnect_wait_reattaches_to_its_container(
        docker_engine: Engine, tmp_path: Path) -> None:
    """A det-agent SIGKILLed while its container trains leaves the container running; started
    again (same id, same work dir) it re-attaches: the trial finishes in the same run (no
    restart), and its log has every line once, those printed while the agent was down too."""
    with bare_cluster(tmp_path) as (master, procs):
        procs.append(_docker.docker_agent(master, docker_engine, tmp_path, "dock"))
        client = master.admin()
        steps = 40
        exp_id = create_experiment(client, _in_image(docker_engine, length=steps, sleep=0.25, chatty=True),
                                   COUNTER)["experiment"]["id"]
        wait_for(lambda: trials(client, exp_id) and "step 5\n" in trial_log_text(client, trials(client, exp_id)[0]["id"]),
                 timeout=120, what="the trial at step 5")
        procs[0].kill()
        procs[0].wait(10)
        api = docker_engine.api()
        running = api.containers(filters={"label": "ai.det-jupyter.agent=dock"})
        assert len(running) == 1, running  # the container outlives its agent
        before = trial_log_text(client, trials(client, exp_id)[0]["id"])
        time.sleep(2)  # lines printed while no agent reads them
        procs.append(_docker.docker_agent(master, docker_engine, tmp_path, "dock"))  # same id, same dir
        assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180) == "STATE_COMPLETED"
        (trial,) = trials(client, exp_id)
        assert trial["restarts"] == 0, trial
        text = trial_log_text(client, trial["id"])
        printed = re.findall(r"^step (\d+)$", text, re.M)
        assert printed == [str(i) for i in range(1, steps + 1)], (before, text)
        assert text.count("run 1 starting at step 0") == 1 and "run 2" not in text
        agent_log = (tmp_path / "dock.log").read_text()
        assert "re-attached to container" in agent_log, agent_log[-3000:]
        assert api.containers(all=True, filters={"label": "ai.det-jupyter.agent=dock"}) == []


def test_a_command_with_an_image_runs_in_a_container(docker_master: MasterProcess, docker_engine: Engine) -> None:
    client = docker_master.admin()
    cmd = client.post("/api/v1/commands", {"config": {
        "entrypoint": ["sh", "-c", "echo pid1=$(cat /proc/1/comm) uid=$(id -u) dir=$PWD"],
        "environment": {"image": docker_engine.image}, "bind_mounts": USR}})["command"]
    wait_for(lambda: client.get(f"/api/v1/commands/{cmd['id']}")["command"]["state"] == "STATE_TERMINATED",
             timeout=120, what="the command's end")
    log = task_log_text(client, cmd["id"])
    assert "pid1=docker-init" in log and "dir=/run/determined/workdir" in log, log
    assert "uid=0 " not in log, log
    # without an image, a command is a process, as before
    plain = client.post("/api/v1/commands", {"config": {
        "entrypoint": ["sh", "-c", "echo pid1=$(cat /proc/1/comm)"]}})["command"]
    wait_for(lambda: client.get(f"/api/v1/commands/{plain['id']}")["command"]["state"] == "STATE_TERMINATED",
             timeout=120, what="the plain command's end")
    assert "pid1=docker-init" not in task_log_text(client, plain["id"])


def test_a_notebook_with_an_image_is_reached_through_the_proxy(
        docker_master: MasterProcess, docker_engine: Engine) -> None:
    """JupyterLab in a container of the skeleton image: Debian's python3 (the host's /usr) with
    the test venv's packages on PYTHONPATH (its site-packages bound read-only at their own
    path, as an image would have them installed); a kernel cell runs over the proxied
    websocket and says where it runs."""
    import asyncio

    from tests.integration import _notebooks as nbh

    site, why_not = _docker.lend_site_packages()
    if why_not:
        pytest.skip(why_not)
    client = docker_master.admin()
    nb_id = nbh.launch(client, environment={
        "image": docker_engine.image, "environment_variables": [f"PYTHONPATH={site}"]},
        bind_mounts=[*USR, {"host_path": site, "container_path": site, "read_only": True}])
    try:
        nbh.wait_running(client, nb_id, timeout=120)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{nbh.state(client, nb_id)}: {task_log_text(client, nb_id)[-4000:]}") from None
    proxy = nbh.proxy_client(client, nb_id)
    kernel = nbh.start_kernel(client, nb_id)
    out = asyncio.run(nbh.run_cell(nbh.ws_url(proxy.url, nb_id, kernel),
                                   {"Authorization": f"Bearer {client.token}"},
                                   "import os; print(open('/proc/1/comm').read().strip(), os.getuid() != 0)"))
    assert out.split() == ["docker-init", "True"], out
    client.post(f"/api/v1/notebooks/{nb_id}/kill", {})
    wait_for(lambda: nbh.state(client, nb_id) == "STATE_TERMINATED", timeout=60, what="the notebook's end")
    api = docker_engine.api()
    wait_for(lambda: not api.containers(all=True, filters={"label": "ai.det-jupyter.allocation"}),
             timeout=30, what="its container removed")


def test_a_two_slot_trial_trains_across_containers_on_two_agents(
        docker_engine: Engine, tmp_path: Path) -> None:
    """A gang of two containers, one per Docker agent: torch.distributed's gloo world forms
    over the host network, both ranks train in step and write one checkpoint."""
    import json

    import yaml

    site, why_not = _docker.lend_site_packages()
    if why_not:
        pytest.skip(why_not)
    with bare_cluster(tmp_path) as (master, procs):
        procs += [_docker.docker_agent(master, docker_engine, tmp_path, name) for name in ("node-a", "node-b")]
        client = master.admin()
        wait_for(lambda: len(client.get("/api/v1/agents")["agents"]) == 2, what="two Docker agents")
        config = {
            "name": "dist", "entrypoint": "python3 -m det_harness.launch.torch_distributed python3 train.py",
            "hyperparameters": {"length": 20},
            "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 20}},
            "resources": {"slots_per_trial": 2}, "max_restarts": 0,
            "environment": {"image": docker_engine.image, "environment_variables": [f"PYTHONPATH={site}"]},
            "bind_mounts": [*USR, {"host_path": site, "container_path": site, "read_only": True}],
        }
        exp_id = create_experiment(client, yaml.safe_dump(config), DDP)["experiment"]["id"]
        state = wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
        (trial,) = trials(client, exp_id)
        text = trial_log_text(client, trial["id"])
        assert state == "STATE_COMPLETED", text[-3000:]
        by_rank = {(e["result"].get("rankId"), e["result"]["message"].strip())
                   for e in client.get(f"/api/v1/trials/{trial['id']}/logs")}
        assert {(0, "worker 0 done"), (1, "worker 1 done")} <= by_rank, text[-3000:]
        ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
        latest = max(ckpts, key=lambda c: c["metadata"]["steps_completed"])
        assert latest["metadata"]["steps_completed"] == 20
        assert {"rank-0.json", "rank-1.json"} <= set(latest["resources"]), latest["resources"]
        root = master.data_dir / "checkpoints" / latest["uuid"]
        weights = [json.loads((root / f"rank-{r}.json").read_text())["weight"] for r in (0, 1)]
        assert weights[0] == weights[1]  # the replicas stayed in step


def test_a_sigtermed_docker_agent_hands_its_trial_over_without_a_restart(
        docker_engine: Engine, tmp_path: Path) -> None:
    """SIGTERM to a Docker agent: the master preempts its trial, which checkpoints in its
    container and exits; the agent leaves; the trial resumes in a container on the other
    agent from that checkpoint, its restart count unchanged."""
    import signal

    with bare_cluster(tmp_path) as (master, procs):
        agents = {name: _docker.docker_agent(master, docker_engine, tmp_path, name, extra=("--drain-timeout", "20"))
                  for name in ("left", "right")}
        procs += agents.values()
        client = master.admin()
        wait_for(lambda: len(client.get("/api/v1/agents")["agents"]) == 2, what="two Docker agents")
        exp_id = create_experiment(client, _in_image(docker_engine, length=200, sleep=0.1, ckpt_every=5),
                                   COUNTER)["experiment"]["id"]
        wait_for(lambda: (ts := trials(client, exp_id)) and "run 1 starting" in trial_log_text(client, ts[0]["id"]),
                 timeout=120, what="the trial running")
        trial_id = trials(client, exp_id)[0]["id"]
        live = client.get("/api/v1/tasks")["allocationIdToSummary"]
        first = next(iter(next(iter(live.values()))["resources"][0]["agentDevices"]))
        wait_for(lambda: client.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"], what="a checkpoint")
        agents[first].send_signal(signal.SIGTERM)
        assert agents[first].wait(timeout=60) == 0, "the agent exits on its own once its task left"
        assert wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240) == "STATE_COMPLETED"
        trial = client.get(f"/api/v1/trials/{trial_id}")["trial"]
        log = trial_log_text(client, trial_id)
        assert trial["restarts"] == 0, log[-3000:]
        preempted_at = int(log.split("preempted at step ")[1].split()[0])
        assert f"run 2 starting at step {preempted_at}" in log
        assert log.count("harness=/run/determined/harness/det_harness") == 2  # both runs in containers
        api = docker_engine.api()
        assert api.containers(all=True, filters={"label": "ai.det-jupyter.allocation"}) == []
