"""Harness collectives between real processes on localhost, and the Core API parts that use them
(preemption agreed by every rank, sharded checkpoints)."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap

import pytest
from det_harness.core import DistributedContext
from det_harness.core._checkpoint import merge_metadata
from det_harness.core._collective import CollectiveError, Group
from det_harness.core._distributed import collective_timeout
from harness_fake_master import FakeMaster, trial_env

_RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
              "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "DET_COLLECTIVE_PORT",
              "DET_COLLECTIVE_TIMEOUT", "DET_MASTER", "DET_TASK_ID")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_ranks(code: str, size: int, *, per_node: int | None = None, timeout_s: str = "60",
               extra: dict[str, str] | None = None) -> list[tuple[int, dict | None, str]]:
    """Run ``code`` in ``size`` processes forming one job; return (rc, last JSON line, stderr)."""
    per_node = per_node or size
    base = {k: v for k, v in os.environ.items() if k not in _RANK_VARS}
    base.update({"MASTER_ADDR": "127.0.0.1", "DET_COLLECTIVE_PORT": str(_free_port()),
                 "DET_COLLECTIVE_TIMEOUT": timeout_s, "DET_SESSION_TOKEN": "tok-123",
                 **(extra or {})})
    procs = []
    for rank in range(size):
        env = {**base, "RANK": str(rank), "WORLD_SIZE": str(size),
               "LOCAL_RANK": str(rank % per_node), "LOCAL_WORLD_SIZE": str(per_node),
               "GROUP_RANK": str(rank // per_node), "GROUP_WORLD_SIZE": str(size // per_node)}
        procs.append(subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=60)  # a hang fails here, not forever
            lines = stdout.strip().splitlines()
            out.append((p.returncode, json.loads(lines[-1]) if lines else None, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def test_allgather_gather_broadcast_across_three_processes() -> None:
    results = _run_ranks("""
        import json
        from det_harness.core import DistributedContext
        d = DistributedContext.from_torch_distributed()
        out = {
            "allgather": d.allgather(d.rank * 10),
            "gather": d.gather({"r": d.rank}),
            "broadcast": d.broadcast("from-chief" if d.is_chief else "ignored"),
            "big": [len(x) for x in d.allgather(b"x" * (1 << 20) * (d.rank + 1))],
            "local": d.allgather_local(d.local_rank),
            "blocal": d.broadcast_local(d.local_rank + 100),
        }
        d.close()
        print(json.dumps(out))
    """, 3)
    for rank, (rc, out, err) in enumerate(results):
        assert rc == 0, err
        assert out is not None
        assert out["allgather"] == [0, 10, 20]
        assert out["gather"] == ([{"r": 0}, {"r": 1}, {"r": 2}] if rank == 0 else None)
        assert out["broadcast"] == "from-chief"
        assert out["big"] == [1 << 20, 2 << 20, 3 << 20]
        assert out["local"] == [0, 1, 2] and out["blocal"] == 100


def test_local_collectives_stay_inside_each_container() -> None:
    # Two "containers" of two ranks each: the local groups must not mix.
    results = _run_ranks("""
        import json
        from det_harness.core import DistributedContext
        d = DistributedContext.from_torch_distributed()
        out = {"local": d.allgather_local(d.rank), "glocal": d.gather_local(d.rank),
               "blocal": d.broadcast_local(f"chief-of-{d.cross_rank}" if d.is_local_chief else None),
               "world": d.allgather(d.cross_rank)}
        print(json.dumps(out))
    """, 4, per_node=2)
    for rank, (rc, out, err) in enumerate(results):
        assert rc == 0, err
        assert out is not None
        node = rank // 2
        assert out["local"] == [2 * node, 2 * node + 1]
        assert out["glocal"] == ([2 * node, 2 * node + 1] if rank % 2 == 0 else None)
        assert out["blocal"] == f"chief-of-{node}"
        assert out["world"] == [0, 0, 1, 1]


_CATCH = """
    import json, sys
    from det_harness.core import DistributedContext
    from det_harness.core._collective import CollectiveError
    d = DistributedContext.from_torch_distributed()
    try:
        {body}
    except CollectiveError as exc:
        print(json.dumps({{"error": str(exc)}}))
        sys.exit(0)
    print(json.dumps({{"error": None}}))
"""


def test_a_worker_that_dies_is_named_not_waited_for() -> None:
    # The timeout is long: the others must notice the death itself, not run out of time.
    body = "d.allgather(1)\n        if d.rank == 2: sys.exit(1)\n        d.allgather(2)"
    results = _run_ranks(_CATCH.format(body=body), 3, timeout_s="120")
    assert results[2][0] == 1
    chief, worker = results[0][1], results[1][1]
    assert chief is not None and worker is not None
    assert "lost rank 2 during allgather #1" in chief["error"]
    assert "[rank=2]" in chief["error"]  # where to look
    assert "rank 1" in worker["error"] and "lost rank 2" in worker["error"]


def test_a_rank_calling_another_collective_fails_everyone() -> None:
    body = "d.broadcast(0) if d.rank == 1 else d.allgather(0)"
    results = _run_ranks(_CATCH.format(body=body), 3)
    for rc, out, err in results:
        assert rc == 0, err
        assert out is not None
        assert "rank 1 called broadcast #0 while the chief called allgather #0" in out["error"]


def test_a_stuck_rank_times_out_with_its_rank_named() -> None:
    # Rank 1 is alive but late (it sleeps well past the 1 s timeout, then leaves).
    body = ("d.allgather(0)\n        if d.rank == 1: import time; time.sleep(4); sys.exit(0)"
            "\n        d.gather(0)")
    results = _run_ranks(_CATCH.format(body=body), 2, timeout_s="1")
    out = results[0][1]
    assert out is not None
    assert "rank(s) [1] did not reach gather #1 within 1 s" in out["error"]
    assert "DET_COLLECTIVE_TIMEOUT" in out["error"]


def test_a_worker_without_the_key_cannot_join() -> None:
    # Rank 1 holds another allocation's token: the chief refuses it, both run out of time.
    code = _CATCH.format(body="d.allgather(0)")
    port = str(_free_port())
    base = {k: v for k, v in os.environ.items() if k not in _RANK_VARS}
    procs = [subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**base, "RANK": str(r), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
             "DET_COLLECTIVE_PORT": port, "DET_COLLECTIVE_TIMEOUT": "1",
             "DET_SESSION_TOKEN": f"token-{r}"}) for r in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    chief = json.loads(outs[0][0].strip().splitlines()[-1])
    worker = json.loads(outs[1][0].strip().splitlines()[-1])
    assert "rank(s) [1] did not connect" in chief["error"]
    assert "wrong key" in outs[0][1]  # the refusal is logged by the chief
    assert "the chief refused the connection: wrong key" in worker["error"]


def test_single_process_needs_no_sockets() -> None:
    d = DistributedContext.from_torch_distributed({})
    assert d.allgather(1) == [1] and d.gather(2) == [2] and d.broadcast(3) == 3
    assert d.allgather_local(4) == [4] and d.broadcast_local(5) == 5
    assert d._groups.world is None and d._groups.local is None
    d.close()


def test_group_rejects_bad_arguments_and_closed_use() -> None:
    with pytest.raises(ValueError, match="rank 2"):
        Group(2, 2, ("127.0.0.1", 1), secret="", timeout=1)
    with pytest.raises(ValueError, match="op 'reduce'"):
        Group(0, 2, ("127.0.0.1", 1), secret="", timeout=1).exchange("reduce", 1)
    d = DistributedContext(rank=1, size=2, local_size=1, collective_port=_free_port())
    d.close()
    with pytest.raises(CollectiveError, match="closed"):
        d.allgather(1)


@pytest.mark.parametrize(("raw", "expected"), [("", 600.0), ("2.5", 2.5)])
def test_collective_timeout_from_env(raw: str, expected: float) -> None:
    assert collective_timeout({"DET_COLLECTIVE_TIMEOUT": raw}) == expected


@pytest.mark.parametrize("raw", ["soon", "0", "-1"])
def test_collective_timeout_rejects(raw: str) -> None:
    with pytest.raises(ValueError, match="DET_COLLECTIVE_TIMEOUT"):
        collective_timeout({"DET_COLLECTIVE_TIMEOUT": raw})


def test_from_torch_distributed_reads_the_collective_settings() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500",
           "DET_SESSION_TOKEN": "s"}
    d = DistributedContext.from_torch_distributed(env)
    assert (d.chief_ip, d.collective_port, d.secret) == ("10.0.0.5", 29501, "s")
    d2 = DistributedContext.from_torch_distributed({**env, "DET_COLLECTIVE_PORT": "4000"})
    assert d2.collective_port == 4000


# -- the Core API on top of the collectives ---------------------------------------------------


def _trial_ranks(master: FakeMaster, tmp_path: pathlib.Path, code: str,
                 size: int = 2) -> list[tuple[int, dict | None, str]]:
    return _run_ranks(code, size, extra=trial_env(master.url, str(tmp_path / "ckpt")))


def test_every_rank_gets_the_chiefs_preemption_answer(master: FakeMaster,
                                                      tmp_path: pathlib.Path) -> None:
    master.routes["/api/v1/allocations/1.abc.1/signals/preemption"] = lambda rec: (
        200, {"preempt": rec.query["timeout_seconds"] != ["0"]})
    results = _trial_ranks(master, tmp_path, """
        import json, time
        import det_harness as det
        with det.core.init() as core:
            for step in range(5000):
                if core.preempt.should_preempt():
                    break
                time.sleep(0.002)
            else:
                step = None
        print(json.dumps({"step": step}))
    """)
    for rc, _out, err in results:
        assert rc == 0, err
    steps = [out["step"] for _, out, _ in results if out is not None]
    assert len(steps) == 2 and steps[0] is not None and steps[0] == steps[1]
    # Only the chief watches and acknowledges.
    assert len(master.find("GET", "/api/v1/allocations/1.abc.1/signals/preemption")) == 2
    assert len(master.find("POST", "/api/v1/allocations/1.abc.1/signals/ack_preemption")) == 1


def test_sharded_checkpoint_is_one_checkpoint_with_every_ranks_files(
        master: FakeMaster, tmp_path: pathlib.Path) -> None:
    results = _trial_ranks(master, tmp_path, """
        import json
        import det_harness as det
        with det.core.init() as core:
            r = core.distributed.rank
            meta = {"steps_completed": 5, "shards": {str(r): r}}
            with core.checkpoint.store_path(meta, shard=True) as (path, sid):
                (path / f"rank{r}.bin").write_bytes(b"x" * (r + 1))
        print(json.dumps({"sid": sid}))
    """)
    for rc, _out, err in results:
        assert rc == 0, err
    sids = {out["sid"] for _, out, _ in results if out is not None}
    assert len(sids) == 1
    (sid,) = sids
    (ck,) = master.find("POST", "/api/v1/checkpoints")
    assert ck.body["uuid"] == sid
    assert ck.body["metadata"] == {"steps_completed": 5, "shards": {"0": 0, "1": 1}}
    assert ck.body["resources"]["rank0.bin"] == "1" and ck.body["resources"]["rank1.bin"] == "2"
    final = tmp_path / "ckpt" / sid
    assert sorted(p.name for p in final.iterdir()) == ["metadata.json", "rank0.bin", "rank1.bin"]
    assert json.loads((final / "metadata.json").read_text())["shards"] == {"0": 0, "1": 1}


def test_sharded_checkpoint_failing_on_one_rank_fails_everywhere(
        master: FakeMaster, tmp_path: pathlib.Path) -> None:
    results = _trial_ranks(master, tmp_path, """
        import json
        import det_harness as det
        with det.core.init() as core:
            r = core.distributed.rank
            try:
                with core.checkpoint.store_path({"steps_completed": 1}, shard=True) as (p, sid):
                    (p / f"rank{r}").write_text("half")
                    if r == 1:
                        raise OSError("disk full")
            except Exception as exc:
                print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    """)
    chief, worker = results[0][1], results[1][1]
    assert chief is not None and worker is not None
    assert chief["error"].startswith("RuntimeError: checkpoint ")
    assert "rank(s) [1]" in chief["error"] and "OSError: disk full" in chief["error"]
    assert worker["error"] == "OSError: disk full"
    assert list((tmp_path / "ckpt").iterdir()) == []
    assert master.find("POST", "/api/v1/checkpoints") == []


def test_unsharded_store_path_is_for_the_chief_only(on_cluster: FakeMaster) -> None:
    import det_harness as det

    dist = DistributedContext(rank=1, size=2, local_rank=1, local_size=2)
    with det.core.init(distributed=dist) as core:
        with pytest.raises(RuntimeError, match=r"non-chief worker \(rank=1\)"):
            with core.checkpoint.store_path({"steps_completed": 1}):
                pass


@pytest.mark.parametrize(
    ("parts", "merged", "conflicts"),
    [
        ([{"a": 1}, {"b": 2}], {"a": 1, "b": 2}, {}),
        ([{"a": 1}, {"a": 1}], {"a": 1}, {}),
        ([{"a": [1]}, {"a": [2]}], {"a": [1]}, {"/a": [0, 1]}),
        ([{"a": {"c": 1}}, {"a": {"d": 1}}], {"a": {"c": 1, "d": 1}}, {}),
        ([{"a": {"c": 1}}, {"a": 1}], {"a": {"c": 1}}, {"/a": [0, 1]}),
        ([{"a": 1}, {"a": {"c": 1}}], {"a": 1}, {"/a": [0, 1]}),
        ([{}, {"steps_completed": 3}], {"steps_completed": 3}, {}),
    ],
)
def test_merge_metadata(parts: list[dict], merged: dict, conflicts: dict) -> None:
    assert merge_metadata(parts) == (merged, conflicts)


def test_upload_without_a_directory_needs_a_sharded_job(tmp_path: pathlib.Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import det_harness as det

    for k in ("DET_MASTER", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)

    with det.core.init(checkpoint_storage=tmp_path) as core:
        with pytest.raises(ValueError, match="ckpt_dir=None"):
            core.checkpoint.upload(None, {"steps_completed": 1}, shard=True)
