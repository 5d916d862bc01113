"""The master ↔ agent wire records (det_agent.wire): each frame's exact wire object, the round
trip through ``from_wire``, the ValueError a bad frame raises, and the trial spec builder's
typed output."""

from __future__ import annotations

import json
from typing import Any

import pytest

from det_agent import wire
from det_agent.wire import (
    Ack,
    Hello,
    KillTask,
    Leaving,
    LogLine,
    Logs,
    Mount,
    Refused,
    RunAs,
    Slot,
    SlotStats,
    SlotStatsReport,
    StartTask,
    TaskExited,
    TaskPulling,
    TaskSpec,
    TaskStarted,
    Welcome,
)
from det_jupyter.rm.base import Container
from det_jupyter.services.allocation.gang import Gang
from det_jupyter.services.allocation.spec import TrialRun, build_trial_spec

SPEC = TaskSpec(
    task_id="7.x", allocation_id="7.x.2", task_type="TRIAL", entrypoint=("python3", "train.py"),
    env={"DET_MASTER": "http://m:8080"}, slot_ids=(0, 1), info_files={"cluster.json": {"a": 1}},
    mounts=(Mount("/ckpt", "/determined_shared_fs"), Mount("/w", "/w", create=True)),
    context_url="/api/v1/tasks/7.x/context_directory", context_digest="sha256:ab",
    run_as=RunAs(1500, 1600, "alice", None),
)
SPEC_WIRE = {
    "task_id": "7.x", "allocation_id": "7.x.2", "task_type": "TRIAL", "entrypoint": ["python3", "train.py"],
    "env": {"DET_MASTER": "http://m:8080"}, "slot_ids": [0, 1],
    "context_url": "/api/v1/tasks/7.x/context_directory", "info_files": {"cluster.json": {"a": 1}},
    "mounts": [{"host_path": "/ckpt", "container_path": "/determined_shared_fs"},
               {"host_path": "/w", "container_path": "/w", "create": True}],
    "context_digest": "sha256:ab", "run_as": {"uid": 1500, "gid": 1600, "user": "alice", "group": None},
}
LINE = LogLine(0, "stdout", "hi\n", "2024-01-01T00:00:00+00:00", None)

FRAMES: list[tuple[Any, dict[str, Any]]] = [
    (Welcome("m-1", "c-1"), {"type": "welcome", "master_id": "m-1", "cluster_id": "c-1"}),
    (Refused("no pool"), {"type": "refused", "message": "no pool"}),
    (StartTask(SPEC), {"type": "start_task", "allocation_id": "7.x.2", "spec": SPEC_WIRE}),
    (KillTask("7.x.2"), {"type": "kill_task", "allocation_id": "7.x.2"}),
    (Ack(4), {"type": "ack", "id": 4}),
    (Hello("a1", "gpu", (Slot(0, "cuda", "H100", "GPU-x"),), ("1.a.1",), "0.1.0", "10.0.0.7"),
     {"type": "hello", "agent_id": "a1", "resource_pool": "gpu",
      "slots": [{"id": 0, "type": "cuda", "name": "H100", "uuid": "GPU-x"}], "running": ["1.a.1"],
      "version": "0.1.0", "address": "10.0.0.7", "containers": ""}),
    (SlotStatsReport((SlotStats(0, 40, 1 << 30, 80 << 30),)),
     {"type": "slot_stats", "slots": [{"id": 0, "gpu_util": 40, "mem_used": 1 << 30, "mem_total": 80 << 30}]}),
    (TaskStarted("1.a.1", 42), {"type": "task_started", "allocation_id": "1.a.1", "pid": 42}),
    (TaskPulling("1.a.1", "team/img:1", id=2),
     {"type": "task_pulling", "allocation_id": "1.a.1", "image": "team/img:1", "id": 2}),
    (TaskStarted("1.a.1", 42, id=3), {"type": "task_started", "allocation_id": "1.a.1", "pid": 42, "id": 3}),
    (Logs("1.a.1", (LINE,)),
     {"type": "logs", "allocation_id": "1.a.1", "lines": [
         {"seq": 0, "stdtype": "stdout", "log": "hi\n", "timestamp": "2024-01-01T00:00:00+00:00", "rank_id": None}]}),
    (TaskExited("1.a.1", 137, "killed", id=9),
     {"type": "task_exited", "allocation_id": "1.a.1", "exit_code": 137, "reason": "killed", "id": 9}),
    (TaskExited("1.a.1", 0, None), {"type": "task_exited", "allocation_id": "1.a.1", "exit_code": 0, "reason": None}),
    (Leaving(30.0), {"type": "leaving", "timeout_s": 30.0}),
]


@pytest.mark.parametrize(("frame", "expected"), FRAMES, ids=[type(f).__name__ for f, _ in FRAMES])
def test_each_frame_is_exactly_its_wire_object_and_round_trips(frame: Any, expected: dict[str, Any]) -> None:
    assert frame.to_wire() == expected
    assert list(frame.to_wire()) == list(expected)  # the keys' order too
    text = json.loads(json.dumps(frame.to_wire()))
    parse = wire.parse_master_frame if type(frame).TYPE in wire.MASTER_FRAMES else wire.parse_agent_frame
    assert parse(text) == frame
    assert type(frame).from_wire(text) == frame


def test_the_task_spec_leaves_out_what_is_unset() -> None:
    spec = TaskSpec("c", "c.1", "COMMAND", "echo hi", {}, (), {})
    assert spec.to_wire() == {"task_id": "c", "allocation_id": "c.1", "task_type": "COMMAND",
                              "entrypoint": "echo hi", "env": {}, "slot_ids": [], "info_files": {},
                              "mounts": []}
    assert TaskSpec.from_wire(spec.to_wire()) == spec
    assert TaskSpec.from_wire({**spec.to_wire(), "context_url": None}) == spec


@pytest.mark.parametrize(("raw", "message"), [
    ([], "JSON object"),
    ({"type": "bogus"}, "unknown frame type 'bogus'"),
    ({"type": "hello", "resource_pool": ""}, "hello: agent_id is missing"),
    ({"type": "hello", "agent_id": "a", "slots": {}}, "hello: slots must be a list"),
    ({"type": "hello", "agent_id": "a", "resource_pool": "", "slots": [{"id": "0", "type": "cpu", "name": "c"}],
      "running": [], "version": "", "address": ""}, "slot: id must be an integer"),
    ({"type": "hello", "agent_id": "a", "resource_pool": "", "slots": [], "running": [1], "version": "",
      "address": ""}, "running must be a list of strings"),
    ({"type": "task_exited", "allocation_id": "x"}, "task_exited: exit_code is missing"),
    ({"type": "task_exited", "allocation_id": "x", "exit_code": True, "reason": None}, "exit_code must be an integer"),
    ({"type": "task_started", "allocation_id": 5, "pid": 1}, "allocation_id must be a string"),
    ({"type": "logs", "allocation_id": "x", "lines": [{"seq": 0}]}, "line: stdtype is missing"),
    ({"type": "logs", "allocation_id": "x", "lines": {}}, "lines must be a list"),
    ({"type": "slot_stats", "slots": [{"id": 0}]}, "gpu_util is missing"),
    ({"type": "leaving", "timeout_s": "5"}, "timeout_s must be a number"),
])
def test_a_bad_agent_frame_names_what_is_wrong(raw: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wire.parse_agent_frame(raw)


@pytest.mark.parametrize(("raw", "message"), [
    ({"type": "start_task"}, "start_task: spec is missing"),
    ({"type": "start_task", "spec": {"allocation_id": "x"}}, "task spec: entrypoint is missing"),
    ({"type": "start_task", "spec": {**SPEC_WIRE, "entrypoint": [1]}}, "entrypoint must be a string or a list"),
    ({"type": "start_task", "spec": {**SPEC_WIRE, "env": {"A": 1}}}, "env must map names to string values"),
    ({"type": "start_task", "spec": {**SPEC_WIRE, "allocation_id": ""}}, "allocation_id is empty"),
    ({"type": "start_task", "allocation_id": "other", "spec": SPEC_WIRE}, "is not its spec's"),
    ({"type": "start_task", "spec": {**SPEC_WIRE, "mounts": [{"host_path": "/x"}]}}, "container_path is missing"),
    ({"type": "start_task", "spec": {**SPEC_WIRE, "run_as": {"uid": 1}}}, "run_as: gid is missing"),
    ({"type": "kill_task"}, "kill_task: allocation_id is missing"),
    ({"type": "ack", "id": "3"}, "ack: id must be an integer"),
    ({"type": "welcome", "master_id": "m"}, "cluster_id is missing"),
    ({"type": "hello"}, "unknown frame type 'hello'"),  # an agent's frame, not the master's
])
def test_a_bad_master_frame_names_what_is_wrong(raw: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wire.parse_master_frame(raw)


class _Ident:
    url = "http://10.0.0.9:8080"
    master_id = "m-1"
    cluster_id = "c-1"


def test_the_trial_spec_builder_returns_the_typed_spec_the_old_dict_was() -> None:
    gang = Gang((Container("a", (0, 1), "10.0.0.1"), Container("b", (3,), "10.0.0.2")), 29404, 29405)
    cfg = {"entrypoint": "python3 train.py", "checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt"}}
    run = TrialRun(allocation_id="7.x.2", task_id="7.x", trial_id=3, experiment_id=7, run_id=2, seed=11,
                   hparams={"lr": 0.1}, latest_checkpoint="u-1", steps=40, config=cfg,
                   config_json=json.dumps(cfg), owner="alice", context_digest="sha256:ab")
    spec = build_trial_spec(run, gang, 1, "tok", _Ident())
    assert isinstance(spec, TaskSpec)
    assert (spec.slot_ids, spec.entrypoint, spec.context_digest) == ((3,), "python3 train.py", "sha256:ab")
    assert spec.mounts == (Mount("/ckpt", "/determined_shared_fs"),)
    out = spec.to_wire()
    assert list(out) == ["task_id", "allocation_id", "task_type", "entrypoint", "env", "slot_ids",
                         "context_url", "info_files", "mounts", "context_digest"]
    assert out["env"]["DET_TRIAL_ID"] == "3" and out["env"]["DET_CONTAINER_RANK"] == "1"


def test_a_hello_names_only_its_agent_the_rest_has_defaults() -> None:
    """An agent that names no pool, slots, runs, version or address (a minimal one, such as
    bench/_bm4_agents.py's) is read as before the frames were typed: default pool, reached at
    127.0.0.1."""
    hello = wire.Hello.from_wire({"type": "hello", "agent_id": "a"})
    assert (hello.resource_pool, hello.slots, hello.running, hello.version, hello.address) == (
        "", (), (), "", "127.0.0.1")
