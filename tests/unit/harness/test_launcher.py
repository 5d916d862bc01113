"""The torch launcher and the rank-prefixing wrapper: pure planning, then real processes
(torchrun with gloo on CPU, as a trial's container would run it)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from det_harness.launch._proc import exit_code, first_failure, write_status
from det_harness.launch._topology import (
    Topology,
    launcher_env,
    single_worker_env,
    split_args,
    topology_from_env,
    torchrun_argv,
)
from det_harness.launch.wrap_rank import resolve_rank, split_lines

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed in this environment; the "
                                        "launcher runs torch.distributed.run")

_DROP = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
         "MASTER_ADDR", "MASTER_PORT", "DET_MASTER", "DET_TASK_ID")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**det: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _DROP and not k.startswith(("DET_", "PET_"))}
    env.update(det)
    return env


def _launch(script: pathlib.Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "det_harness.launch.torch_distributed", *args,
         sys.executable, str(script)],
        env=env, cwd=script.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _script(tmp_path: pathlib.Path, body: str) -> pathlib.Path:
    path = tmp_path / "worker.py"
    path.write_text(textwrap.dedent(body))
    return path


# -- pure planning ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "overrides", "cmd"),
    [
        (["python3", "train.py"], [], ["python3", "train.py"]),
        (["--", "python3", "train.py"], [], ["python3", "train.py"]),
        (["--nproc_per_node", "1", "--", "python3", "t.py"], ["--nproc_per_node", "1"],
         ["python3", "t.py"]),
        (["python3", "t.py", "--", "--flag"], [], ["python3", "t.py", "--", "--flag"]),
        ([], [], []),
    ],
)
def test_split_args(args: list[str], overrides: list[str], cmd: list[str]) -> None:
    assert split_args(args) == (overrides, cmd)


def test_torchrun_argv_for_the_second_of_two_containers() -> None:
    topo = Topology(1, ("10.0.0.1", "10.0.0.2"), (2, 2), rendezvous_port=29400,
                    collective_port=29401)
    assert torchrun_argv(topo, "py", ["--monitor_interval", "1"], ["python3", "t.py"], 29400) == [
        "py", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "2",
        "--node_rank", "1", "--max_restarts", "0", "--rdzv_backend", "static",
        "--master_addr", "10.0.0.1", "--master_port", "29400", "--monitor_interval", "1",
        "--module", "det_harness.launch.wrap_rank", "RANK", "--", "python3", "t.py",
    ]
    assert launcher_env(topo, 29400, 29401) == {
        "USE_TORCH_DISTRIBUTED": "True", "DET_CHIEF_IP": "10.0.0.1",
        "DET_COLLECTIVE_PORT": "29401", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400"}


def test_topology_from_env() -> None:
    topo = topology_from_env({
        "DET_CONTAINER_RANK": "1", "DET_CONTAINER_ADDRS": '["a", "b"]',
        "DET_CONTAINER_SLOT_COUNTS": "[4, 2]", "DET_SLOT_IDS": "[0, 1]",
        "DET_RENDEZVOUS_PORT": "5000", "DET_COLLECTIVE_PORT": "5001"})
    assert (topo.nnodes, topo.nproc, topo.chief_addr) == (2, 2, "a")
    assert (topo.rendezvous_port, topo.collective_port) == (5000, 5001)
    one = topology_from_env({"DET_SLOT_IDS": "[0, 1, 2]"})
    assert (one.nnodes, one.nproc, one.chief_addr, one.rendezvous_port) == (1, 3, "127.0.0.1", None)
    assert topology_from_env({}).nproc == 1 and topology_from_env({"DET_SLOT_IDS": "[]"}).nproc == 1


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DET_CONTAINER_ADDRS": '["a", "b"]', "DET_CONTAINER_SLOT_COUNTS": "[1, 1]"},
         "DET_RENDEZVOUS_PORT"),
        ({"DET_CONTAINER_RANK": "2", "DET_CONTAINER_ADDRS": '["a", "b"]',
          "DET_CONTAINER_SLOT_COUNTS": "[1, 1]", "DET_RENDEZVOUS_PORT": "1"}, "container_rank 2"),
        ({"DET_CONTAINER_ADDRS": '["a"]', "DET_CONTAINER_SLOT_COUNTS": "[1, 1]"}, "same length"),
        ({"DET_CONTAINER_ADDRS": "a,b"}, "DET_CONTAINER_ADDRS"),
        ({"DET_RENDEZVOUS_PORT": "x"}, "DET_RENDEZVOUS_PORT='x'"),
        ({"DET_RENDEZVOUS_PORT": "70000"}, "rendezvous_port 70000"),
    ],
)
def test_topology_rejects(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        topology_from_env(env)


def test_single_worker_env_is_a_world_of_one() -> None:
    env = single_worker_env(Topology(0, ("127.0.0.1",), (1,)), 4000, 4001)
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                "DET_COLLECTIVE_PORT")} == {
        "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "4000", "DET_COLLECTIVE_PORT": "4001"}


@pytest.mark.parametrize(
    ("buf", "lines", "rest"),
    [
        (b"a\nb\n", [b"a", b"b"], b""),
        (b"a\r\nb", [b"a"], b"b"),
        (b"1%\r2%\r", [b"1%"], b"2%\r"),  # a trailing \r may be half of \r\n
        (b"\n\n", [b"", b""], b""),
        (b"x" * 10, [b"xxxx", b"xxxx"], b"xx"),  # the limit (4 here) cuts long lines
    ],
)
def test_split_lines(buf: bytes, lines: list[bytes], rest: bytes) -> None:
    assert split_lines(buf, limit=4) == (lines, rest)


def test_resolve_rank() -> None:
    assert resolve_rank("3", {}) == 3
    assert resolve_rank("OMPI_RANK,RANK", {"RANK": "2"}) == 2
    with pytest.raises(ValueError, match="neither an integer"):
        resolve_rank("RANK", {})


def test_first_failure_is_the_earliest_non_zero(tmp_path: pathlib.Path) -> None:
    assert exit_code(-15) == 143 and exit_code(3) == 3
    write_status(str(tmp_path), 0, 0)
    assert first_failure(str(tmp_path)) is None
    write_status(str(tmp_path), 2, 7)
    later = time.time_ns() + 10**9
    write_status(str(tmp_path), 1, 143)
    os.utime(tmp_path / "1", ns=(later, later))
    assert first_failure(str(tmp_path)) == 7


# -- real processes without torch -------------------------------------------------------------


def test_wrap_rank_prefixes_both_streams_and_keeps_the_exit_code(tmp_path: pathlib.Path) -> None:
    script = _script(tmp_path, """
        import sys
        print("out one"); print("out two", flush=True)
        sys.stderr.write("progress 1\\rprogress 2\\r\\nerr\\n")
        sys.stdout.write("no newline at the end")
        sys.exit(5)
    """)
    res = subprocess.run([sys.executable, "-m", "det_harness.launch.wrap_rank", "RANK", "--",
                          sys.executable, str(script)], capture_output=True, text=True,
                         env={**_env(RANK="4"), "DET_LAUNCH_STATUS_DIR": str(tmp_path)})
    assert res.returncode == 5
    assert res.stdout.splitlines() == ["[rank=4] out one", "[rank=4] out two",
                                       "[rank=4] no newline at the end"]
    assert res.stderr.splitlines() == ["[rank=4] progress 1", "[rank=4] progress 2",
                                       "[rank=4] err"]
    assert (tmp_path / "4").read_text() == "5"


def test_one_slot_execs_the_command_as_a_world_of_one(tmp_path: pathlib.Path) -> None:
    script = _script(tmp_path, """
        import json, os, sys
        keys = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "DET_COLLECTIVE_PORT"]
        print(json.dumps({k: os.environ.get(k) for k in keys} | {"pid": os.getpid()}))
        sys.exit(4)
    """)
    proc = _launch(script, _env(DET_SLOT_IDS="[0]", DET_RENDEZVOUS_PORT="4000",
                                DET_COLLECTIVE_PORT="4001"))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 4, stderr
    out = json.loads(stdout)  # no rank prefix: the launcher became the command (same pid)
    assert out.pop("pid") == proc.pid
    assert out == {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                   "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": "4000", "DET_COLLECTIVE_PORT": "4001"}


def test_launcher_usage_and_topology_errors(tmp_path: pathlib.Path) -> None:
    res = subprocess.run([sys.executable, "-m", "det_harness.launch.torch_distributed"],
                         capture_output=True, text=True, env=_env())
    assert res.returncode == 2 and "usage:" in res.stderr
    res = subprocess.run([sys.executable, "-m", "det_harness.launch.torch_distributed", "true"],
                         capture_output=True, text=True,
                         env=_env(DET_CONTAINER_ADDRS='["a", "b"]',
                                  DET_CONTAINER_SLOT_COUNTS="[1, 1]"))
    assert res.returncode == 2 and "DET_RENDEZVOUS_PORT" in res.stderr


# -- torchrun ----------------------------------------------------------------------------------

_GLOO = """
    import os, sys
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([dist.get_rank() + 1])
    dist.all_reduce(t)
    from det_harness.core import DistributedContext
    ranks = DistributedContext.from_torch_distributed().allgather(dist.get_rank())
    print(f"worker {os.environ['RANK']}/{os.environ['WORLD_SIZE']} "
          f"local {os.environ['LOCAL_RANK']}/{os.environ['LOCAL_WORLD_SIZE']} "
          f"group {os.environ['GROUP_RANK']}/{os.environ['GROUP_WORLD_SIZE']} "
          f"sum {int(t)} harness {ranks}", flush=True)
    dist.destroy_process_group()
    sys.exit(int(os.environ.get(f"EXIT_ON_RANK_{os.environ['RANK']}", "0")))
"""


@pytest.mark.slow
@needs_torch
def test_two_local_workers_form_one_gloo_world(tmp_path: pathlib.Path) -> None:
    # Rank 1 exits 3 after the all_reduce: the launcher must exit with that code.
    proc = _launch(_script(tmp_path, _GLOO), _env(DET_SLOT_IDS="[0, 1]", EXIT_ON_RANK_1="3"))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr[-3000:]
    lines = set(stdout.splitlines())
    assert "[rank=0] worker 0/2 local 0/2 group 0/1 sum 3 harness [0, 1]" in lines, stdout
    assert "[rank=1] worker 1/2 local 1/2 group 0/1 sum 3 harness [0, 1]" in lines, stdout


@pytest.mark.slow
@needs_torch
def test_two_containers_on_one_host_form_one_world(tmp_path: pathlib.Path) -> None:
    common = {"DET_CONTAINER_ADDRS": '["127.0.0.1", "127.0.0.1"]',
              "DET_CONTAINER_SLOT_COUNTS": "[1, 1]", "DET_SLOT_IDS": "[0]",
              "DET_RENDEZVOUS_PORT": str(_free_port()), "DET_COLLECTIVE_PORT": str(_free_port())}
    script = _script(tmp_path, _GLOO)
    procs = [_launch(script, _env(DET_CONTAINER_RANK=str(r), **common)) for r in (0, 1)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert "[rank=0] worker 0/2 local 0/1 group 0/2 sum 3 harness [0, 1]" in outs[0][0]
    assert "[rank=1] worker 1/2 local 0/1 group 1/2 sum 3 harness [0, 1]" in outs[1][0]


@pytest.mark.slow
@needs_torch
def test_sigterm_to_the_launcher_stops_the_workers(tmp_path: pathlib.Path) -> None:
    script = _script(tmp_path, """
        import os, pathlib, time
        pathlib.Path(f"pid{os.environ['RANK']}").write_text(str(os.getpid()))
        time.sleep(120)
    """)
    proc = _launch(script, _env(DET_SLOT_IDS="[0, 1]"))
    pid_files = [tmp_path / "pid0", tmp_path / "pid1"]
    deadline = time.monotonic() + 60
    while not all(f.exists() and f.read_text() for f in pid_files):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    pids = [int(f.read_text()) for f in pid_files]
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, err[-3000:]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_cluster_info_carries_the_container_topology() -> None:
    from det_harness.info import get_cluster_info

    base = {"DET_MASTER": "m:8080", "DET_TASK_ID": "t", "DET_SLOT_IDS": "[0, 1]"}
    info = get_cluster_info(base)
    assert info is not None
    assert (info.container_rank, info.container_addrs, info.container_slot_counts) == (
        0, ["127.0.0.1"], [2])
    info = get_cluster_info({**base, "DET_CONTAINER_RANK": "1",
                             "DET_CONTAINER_ADDRS": '["10.0.0.1", "10.0.0.2"]',
                             "DET_CONTAINER_SLOT_COUNTS": "[2, 2]"})
    assert info is not None
    assert (info.container_rank, info.container_addrs, info.container_slot_counts) == (
        1, ["10.0.0.1", "10.0.0.2"], [2, 2])
