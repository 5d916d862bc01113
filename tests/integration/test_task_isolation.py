"""The escalation suite: a non-admin user's trial tries every route to more rights that we know
of, and every one fails (issue: task isolation).

The trial (``fixtures/escalate/escalate.py``, plain Python) reads its environment, every
process it can see (``/proc/*/environ``, ``cmdline``), the master's data dir and its files,
the database and the log, the agent's task directories (a victim trial of the admin's runs
beside it), and tries its own tokens against admin-only routes and a few ways to root. The
test then looks for every secret it knows (admin password, agent token, proxy secret, the
victim's allocation token and files) anywhere in what the trial printed.

It runs on SQLite and PostgreSQL, on the embedded agent and on a separate ``det-agent``, and
in containers: a ``det-agent`` of the Docker runtime on the tests' private daemon, both trials'
configs naming the skeleton image (Debian's python3 from the host's /usr, bound read-only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests._master import (
    ADMIN_PASSWORD,
    Client,
    MasterProcess,
    create_experiment,
    wait_experiment,
    wait_for,
)
from tests.conftest import backend_db_url
from tests.integration._exp import trials

FIXTURES = Path(__file__).parent / "fixtures"
PASSWORD = "Mallory-Passw0rd"
DATA_FILES = ["admin_password", "agent_token", "proxy_secret", "secrets_key", "master.json", "det.db", "det.db-wal",
              "det.db-shm", "master.log", "test-master.log", "checkpoints", "agent"]
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}
#: What a task's environment may hold besides DET_* and its config's variables.
TASK_ENV = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LC_ALL", "LC_CTYPE", "OPENBLAS_CORETYPE",
            "OPENBLAS_L2_SIZE", "HOME", "USER", "LOGNAME", "PYTHONPATH", "PYTHONUNBUFFERED",
            "CUDA_VISIBLE_DEVICES", "C10D_PORT", "INTER_TRAIN_PROCESS_COMM_PORT_1",
            "INTER_TRAIN_PROCESS_COMM_PORT_2", "CONFIG_VAR",
            "HOSTNAME",  # Docker sets it in every container (the host's, on the host network)
            "PWD"}  # the shell of a container's entrypoint sets it (the working directory)
USR = [{"host_path": "/usr", "container_path": "/usr", "read_only": True}]


@dataclass
class Cluster:
    master: MasterProcess
    admin: Client
    agent_work: Path  # the directory of the agent that runs the tasks
    agent: subprocess.Popen | None = None
    image: str | None = None  # the trials' image (a Docker agent runs them in containers)


def _start_agent(master: MasterProcess, work: Path, docker_host: str | None = None) -> subprocess.Popen:
    token_file = master.data_dir / "agent_token"
    log = open(work / "agent.log", "ab")
    runtime = ["--runtime", "docker"] if docker_host else []
    return subprocess.Popen(
        [sys.executable, "-m", "det_agent", "--master", master.url, "--token-file", str(token_file),
         "--id", "remote", "--slots", "2", "--work-dir", str(work / "agent"), *runtime],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, "DOCKER_HOST": docker_host} if docker_host else None,
    )


@pytest.fixture(params=["sqlite-embedded", "postgres-embedded", "sqlite-det-agent", "postgres-det-agent",
                        "sqlite-docker"], scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    backend, _, where = request.param.partition("-")
    engine = request.getfixturevalue("docker_engine") if where == "docker" else None
    request.param = backend  # backend_db_url reads it
    db_url = backend_db_url(request)
    work = tmp_path_factory.mktemp("isolation")
    remote = where in ("det-agent", "docker")
    master = MasterProcess(work / "master", db_url=db_url,
                           extra_args=["--no-agent"] if remote else []).start()
    agent = _start_agent(master, work, engine.host if engine else None) if remote else None
    try:
        admin = master.admin()
        wait_for(lambda: admin.get("/api/v1/agents")["agents"], what="an agent")
        yield Cluster(master, admin, work / "agent" if remote else master.data_dir / "agent", agent,
                      engine.image if engine else None)
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(timeout=30)
        master.stop()


def _config(name: str, entrypoint: str, hparams: dict, image: str | None = None) -> str:
    return yaml.safe_dump({
        "name": name, "entrypoint": entrypoint, "max_restarts": 0,
        "hyperparameters": {k: {"type": "const", "val": v} for k, v in hparams.items()},
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "environment": {"environment_variables": ["CONFIG_VAR=from-config"],
                        **({"image": image} if image else {})},
        **({"bind_mounts": USR} if image else {}),
    })


def trial_log_text(client: Client, trial_id: int) -> str:
    """The trial's log so far ("" before its first line)."""
    lines = client.get(f"/api/v1/trials/{trial_id}/logs")
    if isinstance(lines, dict):
        lines = [lines]
    return "".join(entry["result"]["message"] for entry in lines if "result" in entry)


def _secrets(c: Cluster) -> dict[str, str]:
    """Every secret of the master's we can name, by what it is."""
    found = {"admin password": ADMIN_PASSWORD}
    for name in ("agent_token", "proxy_secret", "admin_password", "secrets_key"):
        path = c.master.data_dir / name
        if path.exists():
            found[name] = path.read_bytes().decode(errors="replace").strip()
    return {k: v for k, v in found.items() if v}


def _run_attack(c: Cluster, mallory: Client) -> tuple[dict, str, str]:
    """The victim running, then the attack; returns (report, attack log, victim token)."""
    victim = create_experiment(c.admin, _config("victim", "python3 victim.py", {}, c.image), FIXTURES / "victim")
    victim_id = victim["experiment"]["id"]
    victim_trial = wait_for(lambda: (ts := trials(c.admin, victim_id)) and ts[0], what="victim trial")
    line = wait_for(lambda: next((ln for ln in trial_log_text(c.admin, victim_trial["id"]).splitlines()
                                  if ln.startswith("VICTIM ")), None), what="the victim running")
    victim_token = line.split()[1]
    hp = {"data_dir": str(c.master.data_dir), "data_files": DATA_FILES,
          "agent_tasks": str(c.agent_work / "tasks"),
          "extra_paths": [str(c.agent_work), str(c.master.data_dir.parent)]}
    exp = create_experiment(mallory, _config("escalate", "python3 escalate.py", hp, c.image), FIXTURES / "escalate")
    exp_id = exp["experiment"]["id"]
    wait_experiment(mallory, exp_id, TERMINAL, timeout=120)
    log = trial_log_text(mallory, trials(mallory, exp_id)[0]["id"])
    c.admin.post(f"/api/v1/experiments/{victim_id}/kill")
    wait_experiment(c.admin, victim_id, TERMINAL, timeout=60)
    report_line = next((ln for ln in log.splitlines() if ln.startswith("REPORT ")), None)
    assert report_line is not None, f"the attacking trial printed no report:\n{log[-3000:]}"
    return json.loads(report_line[len("REPORT "):]), log, victim_token


@pytest.fixture(scope="module")
def attack(cluster: Cluster) -> tuple[Cluster, dict, str, str]:
    body = cluster.admin.post("/api/v1/users", {"user": {"username": "mallory", "active": True, "admin": False},
                                                "password": PASSWORD})
    assert not body["user"]["admin"]
    mallory = Client(cluster.master.url, cluster.master.login("mallory", PASSWORD))
    report, log, victim_token = _run_attack(cluster, mallory)
    return cluster, report, log, victim_token


def test_no_secret_of_the_master_or_another_task_reaches_the_trial(attack) -> None:
    c, _, log, victim_token = attack
    for what, value in {**_secrets(c), "the victim's allocation token": victim_token,
                        "the victim's file": "victim-secret-"}.items():
        assert value not in log, f"the hostile trial got {what}"


def test_the_environment_is_built_not_inherited(attack) -> None:
    _, report, _, _ = attack
    env = report["env"]
    leaked = sorted(k for k in env if not k.startswith(("DET_", "LC_")) and k not in TASK_ENV)
    assert leaked == [], f"variables of the agent's or master's environment reached the task: {leaked}"
    for key in ("DET_ADMIN_PASSWORD", "DET_AGENT_TOKEN", "DET_AGENT_TOKEN_FILE", "DET_DB_URL",
                "DET_JUPYTER_IDENTITY", "DET_DATA_DIR"):
        assert key not in env
    assert env["CONFIG_VAR"] == "from-config" and env["DET_USER"] == "mallory"
    assert env.get("PWD", "/run/determined/workdir") == "/run/determined/workdir"


def test_it_sees_only_its_own_processes(attack) -> None:
    _, report, _, _ = attack
    procs = report["processes"]
    assert procs, "the trial saw no process at all (not even itself)"
    for pid, parts in procs.items():  # (a warm-started task's own command line is its launcher's)
        cmdline = parts["cmdline"].get("read", "")
        assert "det_jupyter" not in cmdline and "--token" not in cmdline, (pid, cmdline)
    assert len(procs) <= 4, f"more processes than its own are visible: {sorted(procs)}"


def _toward(path: str, target: Path) -> set[str]:
    """The one entry of ``path`` on the way to ``target`` (none when it is not on the way)."""
    rel = os.path.relpath(target, path)
    return set() if rel.startswith("..") else {rel.split(os.sep)[0]}


def test_the_data_dir_and_other_tasks_are_out_of_reach(attack) -> None:
    c, report, _, _ = attack
    storage = c.master.data_dir / "checkpoints"
    for path, got in report["files"].items():
        assert "read" not in got, f"the trial read {path}"
        # Only the way to the checkpoint storage (bound back at its host path) shows in the
        # empty covers.
        assert set(got.get("listed") or ()) <= _toward(path, storage), f"the trial listed {path}: {got['listed']}"
    assert report["agent_tasks"] == {}, f"the trial read other tasks' files: {sorted(report['agent_tasks'])}"
    assert report["cwd"] == "/run/determined/workdir"


def test_it_runs_unprivileged_and_cannot_get_root(attack) -> None:
    _, report, _, _ = attack
    assert report["uid"] != 0 and report["euid"] != 0 and report["gid"] != 0
    assert report["groups"] in ([], [report["gid"]])
    priv = report["privileges"]
    assert priv["setuid0"] != "succeeded"
    assert priv["umount"] != 0 and priv["mount"] != 0 and priv["sudo"] != 0


def test_its_tokens_act_as_its_owner_and_only_as_its_owner(attack) -> None:
    _, report, _, _ = attack
    routes = report["routes"]
    me = routes.pop("me")
    assert me["status"] == 200 and me["body"]["user"]["username"] == "mallory"
    assert not me["body"]["user"]["admin"]
    allowed = {name: status for name, status in routes.items() if status is None or status < 400}
    assert allowed == {}, f"admin-only routes answered a task's token: {allowed}"


def test_a_task_cannot_read_the_agent_token_from_argv(attack) -> None:
    c, _, _, _ = attack
    if c.agent is None:
        pytest.skip("the embedded agent has no command line of its own")
    token = (c.master.data_dir / "agent_token").read_text().strip()
    assert token not in Path(f"/proc/{c.agent.pid}/cmdline").read_text()
    assert token not in Path(f"/proc/{c.agent.pid}/environ").read_bytes().decode(errors="replace")


def test_the_tasks_files_are_its_own(attack) -> None:
    c, report, _, _ = attack
    if os.geteuid() != 0:
        pytest.skip("tasks run as the agent's own user when the agent is not root")
    tasks = c.agent_work / "tasks"
    assert tasks.stat().st_mode & 0o077 == 0
    assert report["uid"] > 0
