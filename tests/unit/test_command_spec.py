"""The command spec builder (``commands.build_command_spec``): its typed TaskSpec is, on the
wire, exactly the dict the command service built before the spec was typed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from det_agent.wire import Mount, TaskSpec
from det_jupyter.rm.base import Container
from det_jupyter.services.allocation.cluster_info import build_info_files
from det_jupyter.services.allocation.gang import Gang
from det_jupyter.services.allocation.spec import gang_env, master_env, task_env
from det_jupyter.services.interactive.commands import build_command_spec
from det_jupyter.services.interactive.kinds import KINDS, work_dir_mounts

IDENT = SimpleNamespace(url="http://10.0.0.9:8080", master_id="m-1", cluster_id="c-1")
GANG = Gang((Container("a", (0, 1), "10.0.0.1"), Container("b", (3,), "10.0.0.2")), 29404, 29405)
UPSTREAM = "f" * 48


def _old_spec(cmd: Any, allocation_id: str, gang: Gang, rank: int, token: str, owner: str,
              allow_root: bool) -> dict[str, Any]:
    """The spec as ``CommandService.build_specs`` built it as a dict (kept verbatim)."""
    addrs = [c.address for c in gang.containers]
    counts = [len(c.slot_ids) for c in gang.containers]
    c = gang.containers[rank]
    env = {**cmd.config.get("env", {}), **master_env(IDENT),
           **task_env(cmd.task_id, allocation_id, rank, token, owner, cmd.task_type), **gang_env(gang, rank)}
    info = build_info_files(
        master_url=IDENT.url, cluster_id=IDENT.cluster_id, agent_id=c.agent_id,
        slot_ids=list(c.slot_ids), task_id=cmd.task_id, allocation_id=allocation_id,
        session_token=token, task_type=cmd.task_type, latest_checkpoint=None, trial=None,
        container_addrs=addrs, container_rank=rank, container_slot_counts=counts, gpu_uuids=[])
    entrypoint = cmd.config["entrypoint"]
    if cmd.task_type in KINDS:
        entrypoint, extra_env = KINDS[cmd.task_type].build(
            cmd.task_id, c.address, gang.rendezvous_port, cmd.config, allow_root)
        env.update(extra_env)
        env["JUPYTER_TOKEN"] = env["DET_PROXY_TOKEN"] = UPSTREAM
    spec = {"task_id": cmd.task_id, "allocation_id": allocation_id, "task_type": cmd.task_type,
            "entrypoint": entrypoint, "env": env, "slot_ids": list(c.slot_ids), "info_files": info,
            "mounts": work_dir_mounts(cmd.config)}
    if cmd.context is not None:
        spec["context_url"] = f"/api/v1/tasks/{cmd.task_id}/context_directory"
    return spec


def _command(entrypoint: str | list[str], context: bytes | None) -> SimpleNamespace:
    config = {"entrypoint": entrypoint, "env": {"A": "1"}, "resources": {"slots": 3}}
    return SimpleNamespace(task_id="cmd-1", task_type="COMMAND", config=config, context=context)


def _notebook() -> SimpleNamespace:
    config = {"entrypoint": "notebook", "env": {}, **KINDS["NOTEBOOK"].settings({}, "alice", {
        "notebook_root": "/data/nb", "notebook_timeout_s": None})}
    return SimpleNamespace(task_id="nb-1", task_type="NOTEBOOK", config=config, context=None)


@pytest.mark.parametrize("cmd", [
    _command("make && ./run", None),
    _command(["python3", "-c", "print(1)"], b"tgz"),
    _notebook(),
], ids=["line", "argv-with-context", "notebook"])
@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("allow_root", [False, True])
def test_the_typed_spec_is_the_old_dict_on_the_wire(cmd: SimpleNamespace, rank: int, allow_root: bool) -> None:
    upstream = UPSTREAM if cmd.task_type in KINDS else None
    spec = build_command_spec(cmd, "cmd-1.1", GANG, rank, "tok", "alice", IDENT, upstream=upstream,
                              allow_root=allow_root)
    assert isinstance(spec, TaskSpec)
    assert spec.to_wire() == _old_spec(cmd, "cmd-1.1", GANG, rank, "tok", "alice", allow_root)
    assert TaskSpec.from_wire(spec.to_wire()) == spec


def test_a_notebook_mounts_its_work_dir_created_for_its_account() -> None:
    spec = build_command_spec(_notebook(), "nb-1.1", GANG, 0, "tok", "alice", IDENT, upstream=UPSTREAM,
                              allow_root=False)
    assert spec.mounts == (Mount("/data/nb/alice", "/data/nb/alice", create=True),)
    assert spec.env["JUPYTER_TOKEN"] == spec.env["DET_PROXY_TOKEN"] == UPSTREAM
    assert spec.context_url is None and spec.slot_ids == (0, 1)


def test_a_command_gets_the_image_of_its_slots_device_type() -> None:
    from det_jupyter.services.interactive.commands import CommandConfig

    cfg = CommandConfig.parse({"entrypoint": "nvidia-smi", "environment": {
        "image": {"cpu": "team/cpu:1", "cuda": "team/gpu:1"}}})
    stored = {t: None if c is None else c.to_wire() for t, c in cfg.containers.items()}
    cmd = SimpleNamespace(task_id="cmd-1", task_type="COMMAND", context=None,
                          config={"entrypoint": "nvidia-smi", "env": {}, "container": stored})
    gang = Gang((Container("g", (0,), "10.0.0.1", "cuda"),), 29404, 29405)
    spec = build_command_spec(cmd, "cmd-1.1", gang, 0, "tok", "alice", IDENT, upstream=None, allow_root=False)
    assert spec.container is not None and spec.container.image == "team/gpu:1"
    plain = CommandConfig.parse({"entrypoint": "true"})
    assert not plain.in_container  # no image: a process on every device type
