"""The Docker runtime's pure parts: the create call, image references, start errors; the
dispatcher and the agent's runtime modes without an engine."""

from __future__ import annotations

import asyncio
import json

import pytest

from det_agent import Agent, LocalLink, Slot
from det_agent.__main__ import _parser
from det_agent._agent import PROCESS_ONLY
from det_agent.runtime import MixedRuntime, ProcessRuntime, Runtime
from det_agent.runtime._docker_args import container_args, image_ref, start_error_code
from det_agent.runtime._isolation import Identity
from det_agent.runtime._taskdir import TaskDir
from det_agent.wire import Container, StartTask, TaskSpec

NOWHERE = "unix:///tmp/det-no-such-docker.sock"


def _bind(src: str, dst: str, ro: bool = False, propagation: str = "rprivate") -> dict:
    return {"Type": "bind", "Source": src, "Target": dst, "ReadOnly": ro,
            "BindOptions": {"Propagation": propagation}}


def test_container_args_exact() -> None:
    spec = {
        "allocation_id": "a.1", "entrypoint": "python3 train.py", "slot_ids": [0],
        "mounts": [{"host_path": "/data", "container_path": "/determined_shared_fs"}],
        "container": {
            "image": "pytorch:2", "bind_mounts": [
                {"host_path": "/ds", "container_path": "/ds", "read_only": True,
                 "propagation": "rslave"}],
            "devices": [{"host_path": "/dev/fuse", "container_path": "/dev/fuse", "mode": "rw"}],
            "add_capabilities": ["SYS_ADMIN"], "drop_capabilities": ["NET_RAW"],
            "shm_size": 1 << 30,
        },
    }
    create, host = container_args(
        spec, taskdir=TaskDir("/w/tasks/a.1"), env={"DET_X": "1"},
        identity=Identity(1500, 1600, "alice", True, "linked"), agent_id="ag",
        harness_package="/src/harness/det_harness", gpu_ids=["GPU-1"], mem_limit=1 << 28)
    assert create == {
        "image": "pytorch:2", "entrypoint": ["sh", "-c", "python3 train.py"], "command": [],
        "user": "1500:1600", "working_dir": "/run/determined/workdir",
        "environment": {"DET_X": "1"},
        "labels": {"ai.det-jupyter.allocation": "a.1", "ai.det-jupyter.agent": "ag"},
        "detach": True,
    }
    assert host == {
        "init": True,
        "network_mode": "host",
        "mounts": [
            _bind("/w/tasks/a.1/run", "/run/determined"),
            _bind("/w/tasks/a.1/work", "/run/determined/workdir"),
            _bind("/src/harness/det_harness", "/run/determined/harness/det_harness", ro=True),
            _bind("/data", "/determined_shared_fs"),
            _bind("/ds", "/ds", ro=True, propagation="rslave"),
        ],
        "cap_drop": ["ALL", "NET_RAW"], "cap_add": ["SYS_ADMIN"],
        "security_opt": ["no-new-privileges"],
        "devices": ["/dev/fuse:/dev/fuse:rw"], "shm_size": 1 << 30,
        "mem_limit": 1 << 28, "memswap_limit": 1 << 28,
        "device_requests": [{"driver": "nvidia", "device_ids": ["GPU-1"], "capabilities": [["gpu"]]}],
    }


def test_an_argv_entrypoint_is_the_argv() -> None:
    spec = {"allocation_id": "a", "entrypoint": ["python3", "-c", "1"], "container": {"image": "i"}}
    create, host = container_args(spec, taskdir=TaskDir("/t"), env={}, identity=Identity(1, 2, None, False, "agent"),
                                  agent_id="ag", harness_package=None)
    assert create["entrypoint"] == ["python3", "-c", "1"]
    assert [m["Target"] for m in host["mounts"]] == ["/run/determined", "/run/determined/workdir"]
    assert "cap_add" not in host and "mem_limit" not in host and "device_requests" not in host


@pytest.mark.parametrize(("image", "ref"), [
    ("python", ("python", "latest")),
    ("python:3.11", ("python", "3.11")),
    ("reg.example:5000/team/img", ("reg.example:5000/team/img", "latest")),
    ("reg.example:5000/team/img:v2", ("reg.example:5000/team/img", "v2")),
    ("img@sha256:abc", ("img", "sha256:abc")),
])
def test_image_ref(image: str, ref: tuple[str, str]) -> None:
    assert image_ref(image) == ref


@pytest.mark.parametrize(("message", "code"), [
    ('exec: "/no/such": stat /no/such: no such file or directory: unknown', 127),
    ('exec: "nope": executable file not found in $PATH: unknown', 127),
    ("exec: \"/etc/passwd\": permission denied: unknown", 126),
    ("cgroup setup failed", 1),
    ('error mounting "/gone" to rootfs at "/data": stat /gone: no such file or directory', 1),
])
def test_start_error_code(message: str, code: int) -> None:
    assert start_error_code(message) == code


def test_mixed_runtime_without_docker_fails_image_tasks_at_once(tmp_path) -> None:
    process = ProcessRuntime(str(tmp_path), agent_id="a", slots=[Slot(0, "cpu", "cpu")],
                             isolate=False, warm_start=False)
    mixed = MixedRuntime(process, None, no_docker="no Docker engine at x: refused")
    got: list = []

    async def scenario() -> int | None:
        return await mixed.start(
            {"allocation_id": "a.1", "entrypoint": "true", "container": {"image": "img:1"}},
            lambda a, lines: got.append(("log", a, [ln.log for ln in lines], lines[0].stdtype)),
            lambda a, code, reason: got.append(("exit", a, code, reason)))

    assert asyncio.run(scenario()) is None
    why = "cannot run image img:1: this agent runs no containers (no Docker engine at x: refused)"
    assert got == [("log", "a.1", [why + "\n"], "stderr"), ("exit", "a.1", 1, why)]
    assert mixed.containers == "no Docker engine at x: refused" and mixed.running() == []
    with pytest.raises(ValueError, match="no_docker"):
        MixedRuntime(process, None)


def _agent(tmp_path, **kw) -> Agent:
    return Agent("http://127.0.0.1:1", "t", agent_id="a", slots=[Slot(0, "cpu", "cpu")],
                 work_dir=str(tmp_path), warm_start=False, **kw)


def test_agent_runtime_modes_without_an_engine(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    auto = _agent(tmp_path)
    assert isinstance(auto.runtime, ProcessRuntime)
    assert auto.containers.startswith(f"no Docker engine at {NOWHERE}")
    assert _agent(tmp_path, runtime_mode="process").containers == PROCESS_ONLY
    with pytest.raises(ValueError, match=f"--runtime docker: no Docker engine at {NOWHERE}"):
        _agent(tmp_path, runtime_mode="docker")
    with pytest.raises(ValueError, match="runtime_mode must be one of auto, docker, process"):
        _agent(tmp_path, runtime_mode="podman")


def test_an_explicit_runtime_is_kept(tmp_path) -> None:
    class Idle(Runtime):
        async def start(self, spec, on_log, on_exit):  # noqa: ANN001, ANN201
            return None

        async def kill(self, allocation_id):  # noqa: ANN001, ANN201
            return None

        def running(self):  # noqa: ANN201
            return []

        async def shutdown(self):  # noqa: ANN201
            return None

    runtime = Idle()
    agent = _agent(tmp_path, runtime=runtime, runtime_mode="docker")  # the mode is not consulted
    assert agent.runtime is runtime
    assert agent.containers == "the agent's runtime runs no containers"


def test_help_documents_runtime() -> None:
    text = " ".join(_parser().format_help().split())
    assert "--runtime {auto,docker,process}" in text
    assert "DOCKER_HOST" in text and "environment.image" in text


def test_an_agent_without_containers_says_so_and_refuses_image_tasks(tmp_path) -> None:
    """hello.containers carries the reason; a start_task naming an image ends at once."""
    frames: list[dict] = []
    arrived = asyncio.Event()
    links: list[LocalLink] = []

    def connect() -> LocalLink:
        def deliver(text: str) -> None:
            frame = json.loads(text)
            frames.append(frame)
            if isinstance(frame.get("id"), int):
                link.push(json.dumps({"type": "ack", "id": frame["id"]}))
            arrived.set()

        link = LocalLink(deliver, lambda: None)
        links.append(link)
        return link

    async def until(kind: str) -> dict:
        while not any(f["type"] == kind for f in frames):
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), 10)
        return next(f for f in frames if f["type"] == kind)

    async def scenario() -> tuple[dict, dict, dict]:
        agent = _agent(tmp_path, runtime_mode="process", connect=connect, stats_interval=0)
        run = asyncio.create_task(agent.run())
        try:
            hello = await until("hello")
            spec = TaskSpec("t", "t.1", "COMMAND", "true", {}, (0,), {},
                            container=Container(image="img:1"))
            links[0].push(json.dumps(StartTask(spec).to_wire()))
            return hello, await until("logs"), await until("task_exited")
        finally:
            await agent.stop()
            await run

    hello, logs, exited = asyncio.run(scenario())
    why = f"cannot run image img:1: this agent runs no containers ({PROCESS_ONLY})"
    assert hello["containers"] == PROCESS_ONLY
    assert [(x["stdtype"], x["log"]) for x in logs["lines"]] == [("stderr", why + "\n")]
    assert (exited["allocation_id"], exited["exit_code"], exited["reason"]) == ("t.1", 1, why)
    assert not any(f["type"] == "task_started" for f in frames)
