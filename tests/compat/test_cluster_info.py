"""The info files det_jupyter builds are what the stock determined harness reads."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from det_jupyter.services.allocation.cluster_info import TRIAL_KEYS, build_info_files

pytestmark = pytest.mark.compat

_PROBE = Path(__file__).with_name("_info_probe.py")
_CKPT = {
    "type": "shared_fs",
    "host_path": "/data/checkpoints",
    "storage_path": "exp-store",
    "propagation": "rprivate",
    "save_experiment_best": 0,
    "save_trial_best": 1,
    "save_trial_latest": 1,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _trial(**over: Any) -> dict[str, Any]:
    trial = {
        "trial_id": 5,
        "experiment_id": 3,
        "trial_seed": 1234,
        "hparams": {"lr": 0.1, "layers": {"n": 2}},
        "config": {"checkpoint_storage": _CKPT, "data": {"url": "s3://x"}, "searcher": {}},
        "steps_completed": 40,
        "trial_run_id": 2,
        "debug": False,
        "inter_node_network_interface": None,
    }
    return {**trial, **over}


def _files(port: int, **over: Any) -> dict[str, dict]:
    kw: dict[str, Any] = dict(
        master_url=f"http://127.0.0.1:{port}",
        cluster_id="c-1",
        agent_id="agent-a",
        slot_ids=[0],
        task_id="3.abc",
        allocation_id="3.abc.2",
        session_token="alloc-token",
        task_type="TRIAL",
        latest_checkpoint="0b5e-uuid",
        trial=_trial(),
        container_addrs=["127.0.0.1"],
        container_rank=0,
        container_slot_counts=[1],
        gpu_uuids=["GPU-1"],
    )
    kw.update(over)
    return build_info_files(**kw)


def _probe(det_env, files: dict[str, dict], tmp_path: Path, *args: str) -> dict:
    for name, obj in files.items():
        (tmp_path / name).write_text(json.dumps(obj))
    res = det_env.run_python(
        _PROBE.read_text(),
        args=[str(tmp_path), *args],
        env_extra={
            "DET_SESSION_TOKEN": "alloc-token",
            "DET_USER": "determined",
            "DET_ALLOCATION_ID": "3.abc.2",
        },
        cwd=tmp_path,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_trial_info_round_trips_through_stock_harness(det_env, tmp_path: Path) -> None:
    out = _probe(det_env, _files(9), tmp_path)
    assert out["loaded"]
    assert out["master_url"] == "http://127.0.0.1:9"
    assert (out["task_id"], out["allocation_id"], out["task_type"]) == ("3.abc", "3.abc.2", "TRIAL")
    assert out["latest_checkpoint"] == "0b5e-uuid"
    assert out["user_data"] == {"url": "s3://x"}
    assert out["container_addrs"] == ["127.0.0.1"] and out["container_slot_counts"] == [1]
    assert out["gpu_uuids"] == ["GPU-1"]
    assert out["trial"] == {
        "trial_id": 5,
        "experiment_id": 3,
        "trial_seed": 1234,
        "hparams": {"lr": 0.1, "layers": {"n": 2}},
        "steps_completed": 40,
        "trial_run_id": 2,
        "debug": False,
    }


def test_non_trial_task_has_no_trial_json_and_no_checkpoint(det_env, tmp_path: Path) -> None:
    files = _files(9, task_type="COMMAND", trial=None, latest_checkpoint=None, gpu_uuids=[])
    assert set(files) == {"cluster.json", "resources.json", "rendezvous.json"}
    out = _probe(det_env, files, tmp_path)
    assert out["task_type"] == "COMMAND" and out["latest_checkpoint"] is None
    assert "trial" not in out


def test_core_init_builds_shared_fs_storage_under_container_path(det_env, tmp_path: Path) -> None:
    port = _free_port()
    core = _probe(det_env, _files(port), tmp_path, "--core-init")["core"]
    assert core["storage_manager"] == "SharedFSStorageManager"
    # host_path is replaced by the container mount point; storage_path stays below it.
    assert core["storage_base_path"] == "/determined_shared_fs/exp-store"
    assert core["storage_id"] == 7
    assert core["distributed_size"] == 1 and core["has_train"]
    # Without searcher.max_length in the config, .searcher is a stub that raises when used.
    assert core["searcher"] == "SearcherContextMissing"
    [req] = core["requests"]
    assert req["path"] == "/api/v1/runs/start"
    assert req["token"] == "Bearer alloc-token" and req["authorization"] is None
    assert req["body"] == {"runId": 5, "checkpointStorage": _CKPT}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"task_type": "TRAIL"}, "task_type 'TRAIL'"),
        ({"trial": None}, "needs trial info"),
        ({"trial": {**_trial(), "extra": 1}}, "unexpected ['extra']"),
        (
            {"trial": {k: v for k, v in _trial().items() if k != "trial_seed"}},
            "missing ['trial_seed']",
        ),
        ({"trial": _trial(config={"searcher": {}})}, "checkpoint_storage"),
        ({"container_rank": 1}, "container_rank 1"),
        ({"container_slot_counts": []}, "same length"),
    ],
)
def test_builder_rejects_what_the_harness_would_crash_on(over: dict, message: str) -> None:
    with pytest.raises(ValueError) as e:
        _files(9, **over)
    assert message in str(e.value)


def test_trial_keys_match_stock_trialinfo_signature(det_env) -> None:
    res = det_env.run_python(
        "import inspect, json, determined as det;"
        "print(json.dumps([p for p in inspect.signature(det.TrialInfo).parameters]))"
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == list(TRIAL_KEYS)
