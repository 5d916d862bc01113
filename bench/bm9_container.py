"""BM-9: container task overhead. A no-op task in an image through the agent's Docker runtime,
from the start call (what the agent does on a placement) to the task's first log line, against
``docker run`` of the same image and command by hand, with the process runtime running the same
command as the floor.

Setup (untimed): a private Docker daemon (tests/_docker.py: its own data root and socket, no
iptables, no bridge) and the registry-free skeleton image ``det-skel:1``, whose programs come
from the host's /usr bound read-only. The command is ``sh -c 'echo first'``.

Timed, per round, the three sides in turn (their order rotating), ``runs`` rounds:
- ``ours_ms``: ``DockerRuntime.start(spec)`` called -> the first line reaches the agent's log
  callback (task directory, info files, container create with its mounts and labels, attach,
  start, the line through the attach stream);
- ``docker_run_ms``: ``docker run --rm --network host -v /usr:/usr:ro det-skel:1 sh -c 'echo
  first'`` started (the CLI against the same daemon) -> its first stdout line;
- ``process_ms``: ``ProcessRuntime.start(spec)`` (no container; namespaces where the host allows,
  as the agent runs tasks) -> the first line.

Target (benchmarks.md): ours <= 1.2 x docker run + 150 ms; ``margin_ms`` = 1.2 x docker_run +
150 - ours (>= 0 meets it). Medians of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from typing import Any

from _common import emit, log, median

from det_agent import Slot
from det_agent.runtime import DockerRuntime, ProcessRuntime
from tests._docker import private_daemon, why_no_docker

COMMAND = ["sh", "-c", "echo first"]
USR = {"host_path": "/usr", "container_path": "/usr", "read_only": True}


def _spec(allocation_id: str, image: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "task_id": "bm9", "allocation_id": allocation_id, "task_type": "COMMAND",
        "entrypoint": COMMAND, "env": {"DET_MASTER": "http://127.0.0.1:1"}, "slot_ids": [],
        "info_files": {}, "mounts": [],
    }
    if image:
        spec["container"] = {"image": image, "bind_mounts": [USR], "devices": [],
                             "add_capabilities": [], "drop_capabilities": []}
    return spec


async def _first_line(runtime: Any, spec: dict[str, Any]) -> float:
    """Milliseconds from start() to the first log line; waits for the exit too."""
    first = asyncio.get_running_loop().create_future()
    ended = asyncio.get_running_loop().create_future()

    def on_log(_alloc: str, lines: list) -> None:
        if lines and not first.done():
            first.set_result(time.perf_counter())

    def on_exit(_alloc: str, code: int, reason: str | None) -> None:
        if not ended.done():
            ended.set_result((code, reason))

    t0 = time.perf_counter()
    await runtime.start(spec, on_log, on_exit)
    got = await asyncio.wait_for(first, 60)
    code, reason = await asyncio.wait_for(ended, 60)
    if code != 0:
        raise RuntimeError(f"{spec['allocation_id']} exited {code}: {reason}")
    return (got - t0) * 1000


def _docker_run(host: str, image: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(["docker", "-H", host, "run", "--rm", "--network", "host",
                             "-v", "/usr:/usr:ro", image, *COMMAND], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    got = time.perf_counter()
    proc.wait(timeout=60)
    if line.strip() != "first" or proc.returncode != 0:
        raise RuntimeError(f"docker run printed {line!r} and exited {proc.returncode}")
    return (got - t0) * 1000


async def _rounds(runs: int, host: str, image: str, work: str) -> dict[str, list[float]]:
    slots = [Slot(0, "cpu", "cpu")]
    docker = DockerRuntime(os.path.join(work, "docker"), agent_id="bm9", slots=slots, host=host)
    process = ProcessRuntime(os.path.join(work, "process"), agent_id="bm9", slots=slots, warm_start=True)
    out: dict[str, list[float]] = {"ours": [], "docker_run": [], "process": []}
    sides = ["ours", "docker_run", "process"]
    try:
        for i in range(runs + 1):  # round 0 warms every side up and is not kept
            took: dict[str, float] = {}
            for side in sides[i % 3:] + sides[:i % 3]:
                if side == "ours":
                    took[side] = await _first_line(docker, _spec(f"bm9-d{i}", image))
                elif side == "process":
                    took[side] = await _first_line(process, _spec(f"bm9-p{i}", None))
                else:
                    took[side] = await asyncio.to_thread(_docker_run, host, image)
            if i:
                for side, ms in took.items():
                    out[side].append(ms)
                log(f"round {i}: " + ", ".join(f"{s} {ms:.0f} ms" for s, ms in took.items()))
    finally:
        await docker.shutdown()
        await process.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="3 rounds")
    args = parser.parse_args()
    runs = 3 if args.smoke else args.runs
    why = why_no_docker()
    if why:
        emit({"bench": "bm9_container", "skipped": why, "smoke": args.smoke, "peers": []})
        return
    with private_daemon() as engine, tempfile.TemporaryDirectory(prefix="bm9-") as work:
        os.chmod(work, 0o755)  # tasks run as an unprivileged account and must reach their dirs
        times = asyncio.run(_rounds(runs, engine.host, engine.image, work))
    ours, run, proc = (median(times[k]) for k in ("ours", "docker_run", "process"))
    assert ours is not None and run is not None and proc is not None
    emit({
        "bench": "bm9_container", "smoke": args.smoke, "rounds": runs, "peers": [],
        "ours_ms": ours, "docker_run_ms": run, "process_ms": proc,
        "ratio_vs_docker_run": ours / run, "margin_ms": 1.2 * run + 150 - ours,
        "meets_target": ours <= 1.2 * run + 150,
    })


if __name__ == "__main__":
    main()
