"""BM-10: JupyterHub spawn. A hub user's server spawned through DetSpawner, request -> ready,
against JupyterHub's own local-process spawner on the same machine in the same run; then many
users spawning at once.

Setup (untimed): a real det master (one slot, its embedded agent, ``--hub-api-url`` and the
hub's service token, as tests/integration/test_jupyterhub.py runs it) and two real JupyterHub
processes (tests/_hub.py: DummyAuthenticator, configurable-http-proxy from npm, SQLite), both
up for the whole run, idle while the other is timed:
- ``det``: ``c.JupyterHub.spawner_class = "det"`` with ``c.DetSpawner.slots = 0``: the server
  is a zero-slot det notebook task (POST /api/v1/hub/servers, the scheduler places it, the agent
  starts ``jupyterhub-singleuser``, the spawner polls the master until the task answers);
- ``local``: JupyterHub's ``SimpleLocalProcessSpawner`` ("simple"), its LocalProcessSpawner
  without the switch to a system account of the user's name (none exists here): a ``Popen`` of
  the same ``jupyterhub-singleuser`` of the same venv, as the hub's own account (det's agent
  runs as the same one and adds its task isolation), with the same flags det gives it (no
  news, no update check, allow_root as root)
  and ``DET_TASK_TYPE`` in its environment as det's task has it, so det_jupyter's server
  extension (installed in the venv) takes its in-task form on both sides and starts no det
  master inside the user's server.

Timed, per round, the two sides in turn (order rotating; round 0 warms up and is not kept),
one user per side, polled every 20 ms:
- ``*_ready_ms``: POST /users/<u>/server (admin token) sent -> the server's ``ready`` true in
  GET /users/<u>;
- ``*_proxied_ms``: the same start -> the first 200 from GET <hub>/user/<u>/api/status through
  the hub's proxy with the user's own token (redirects not followed).
The server is stopped (DELETE, then until the hub lists it no more) between spawns.

Target (benchmarks.md): det <= 1.3 x local. ``ratio_vs_local`` is the median of the per-round
ratios det/local of ``ready``; ``margin_ms`` = 1.3 x local - det (medians; >= 0 meets it).

Then ``--users`` users (20; 3 with ``--smoke``) POSTed at once on each hub (threads, a
barrier), all polled through one GET /users every 20 ms: spawn-to-ready p50/p95/max, and how
many were not ready within ``--conc-timeout`` seconds (``*_conc_not_ready``, 0 wanted).
Without jupyterhub or configurable-http-proxy it prints a ``skipped`` summary.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from _common import emit, log, median, percentile

from tests._hub import CHP_CACHE, Hub, _chp
from tests._master import MasterProcess, free_port

POLL_S = 0.02
SPAWN_TIMEOUT_S = 180.0
SIDES = ("det", "local")
TARGET_X = 1.3


def _local_config(home: Path) -> str:
    """Config lines (appended to tests/_hub.py's, so they win) that make a hub spawn local
    processes of the same ``jupyterhub-singleuser`` det's agent starts, with det's flags."""
    singleuser = str(Path(sys.executable).parent / "jupyterhub-singleuser")
    args = ["--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        args.append("--ServerApp.allow_root=True")
    return (f'\nc.JupyterHub.spawner_class = "simple"\n'
            f"c.SimpleLocalProcessSpawner.home_dir_template = {str(home / '{username}')!r}\n"
            f"c.Spawner.cmd = [{singleuser!r}]\n"
            f"c.Spawner.args = {args!r}\n"
            # As in det's task (the agent sets it there): det_jupyter's server extension then
            # does not start a det master inside the user's server.
            'c.Spawner.environment = {"DET_TASK_TYPE": "NOTEBOOK"}\n')


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect means: not routed to the server yet


_OPENER = urllib.request.build_opener(_NoRedirect)


def _status(url: str, token: str) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with _OPENER.open(req, timeout=10) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def _until(what: str, hub: Hub, check: Any, timeout: float = SPAWN_TIMEOUT_S) -> float:
    """Poll ``check()`` every POLL_S until true; the perf_counter when it was."""
    deadline = time.perf_counter() + timeout
    while True:
        if check():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}:\n{hub.log()[-3000:]}")
        time.sleep(POLL_S)


def _ready(hub: Hub, user: str) -> bool:
    server = hub.server(user)
    if not server:
        raise RuntimeError(f"{user}'s server is gone (the spawn failed):\n{hub.log()[-3000:]}")
    return bool(server.get("ready"))


def spawn_once(hub: Hub, user: str, token: str) -> dict[str, float]:
    """One timed spawn: POST -> ready, and -> the first 200 through the proxy (ms)."""
    status_url = f"{hub.url}/user/{user}/api/status"
    t0 = time.perf_counter()
    hub.api("POST", f"/users/{user}/server")
    posted = time.perf_counter()
    ready = _until(f"{user}'s server ready", hub, lambda: _ready(hub, user))
    proxied = _until(f"{user}'s server through the proxy", hub, lambda: _status(status_url, token) == 200)
    return {"post_ms": (posted - t0) * 1000, "ready_ms": (ready - t0) * 1000,
            "proxied_ms": (proxied - t0) * 1000}


def stop_servers(hub: Hub, users: list[str]) -> None:
    """Stop the users' servers (all at once) and wait until the hub lists none of them."""
    threads = [threading.Thread(target=hub.api, args=("DELETE", f"/users/{u}/server")) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _until("the servers stopped", hub, lambda: not any(_servers(hub).get(u) for u in users), timeout=120)


def _servers(hub: Hub) -> dict[str, dict[str, Any]]:
    """Every user's default server as GET /users lists it (``{}``: none)."""
    users = hub.api("GET", "/users?limit=1000")
    assert isinstance(users, list)
    return {u["name"]: (u.get("servers") or {}).get("", {}) for u in users}


def spawn_at_once(hub: Hub, users: list[str], timeout: float) -> dict[str, Any]:
    """POST every user's server at once; spawn-to-ready per user (ms) and those not ready."""
    barrier = threading.Barrier(len(users))
    started: dict[str, float] = {}
    errors: dict[str, str] = {}

    def post(user: str) -> None:
        barrier.wait()
        started[user] = time.perf_counter()
        try:
            hub.api("POST", f"/users/{user}/server")
        except (OSError, ValueError) as e:  # a 5xx (urllib's HTTPError is an OSError)
            errors[user] = f"{type(e).__name__}: {e}"

    threads = [threading.Thread(target=post, args=(u,)) for u in users]
    for t in threads:
        t.start()
    ready: dict[str, float] = {}
    deadline = time.perf_counter() + timeout
    while len(ready) + len(errors) < len(users) and time.perf_counter() < deadline:
        now = time.perf_counter()
        for name, server in _servers(hub).items():
            if name in started and name not in ready and server.get("ready"):
                ready[name] = (now - started[name]) * 1000
        time.sleep(POLL_S)
    for t in threads:
        t.join()
    took = list(ready.values())
    return {"users": len(users), "not_ready": len(users) - len(ready), "errors": errors,
            "p50_ms": percentile(took, 50) if took else None, "p95_ms": percentile(took, 95) if took else None,
            "max_ms": max(took) if took else None}


def _why_not() -> str | None:
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "jupyterhub is not installed (pip install -e '.[hub]')"
    if _chp() is None:
        return (f"configurable-http-proxy is not installed (scripts/test.sh installs it with npm into {CHP_CACHE}; "
                "or npm install -g configurable-http-proxy)")
    return None


def run(rounds: int, n_users: int, conc_timeout: float, work: Path) -> dict[str, Any]:
    chp = _chp()
    assert chp is not None
    service_token = secrets.token_hex(24)
    hub_api_port = free_port()
    master = MasterProcess(work / "master", slots=1, env={"JUPYTERHUB_API_TOKEN": service_token},
                           extra_args=["--hub-api-url", f"http://127.0.0.1:{hub_api_port}/hub/api"]).start()
    hubs = {"det": Hub(work / "hub-det", master.url, service_token),
            "local": Hub(work / "hub-local", master.url, secrets.token_hex(24))}
    hubs["det"].api_port = hub_api_port
    # A hub stopped early (a failed run) takes its users' servers down with it: local ones live
    # in sessions of their own and would outlive it.
    hubs["det"].extra = "\nc.JupyterHub.cleanup_servers = True\n"
    hubs["local"].extra = hubs["det"].extra + _local_config(work / "home")
    conc_users = [f"c{i:02d}" for i in range(n_users)]
    try:
        for hub in hubs.values():
            hub.work.mkdir()
            hub.start(chp, slots=0)
        tokens = {}
        for side, hub in hubs.items():
            for user in ["solo", *conc_users]:
                hub.api("POST", f"/users/{user}")
            tokens[side] = hub.api("POST", "/users/solo/tokens", {"note": "bm10"})["token"]  # type: ignore[index]
        runs: list[dict[str, Any]] = []
        for i in range(rounds + 1):  # round 0 warms both sides up and is not kept
            took: dict[str, dict[str, float]] = {}
            for side in SIDES[i % 2:] + SIDES[:i % 2]:
                took[side] = spawn_once(hubs[side], "solo", tokens[side])
                stop_servers(hubs[side], ["solo"])
            log(f"round {i}{' (warm-up)' if not i else ''}: " + ", ".join(
                f"{s} ready {t['ready_ms']:.0f} ms, proxied {t['proxied_ms']:.0f} ms" for s, t in took.items()))
            if i:
                runs.append(took)
        conc: dict[str, dict[str, Any]] = {}
        for side in SIDES:
            conc[side] = spawn_at_once(hubs[side], conc_users, conc_timeout)
            log(f"{n_users} at once, {side}: {conc[side]}")
            stop_servers(hubs[side], conc_users)
    finally:
        for hub in hubs.values():
            hub.stop()
        master.stop()
    return {"runs": runs, "conc": conc}


def summarize(runs: list[dict[str, Any]], conc: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in SIDES:
        for field in ("ready_ms", "proxied_ms", "post_ms"):
            out[f"{side}_{field}"] = median([r[side][field] for r in runs])
    ratios = [r["det"]["ready_ms"] / r["local"]["ready_ms"] for r in runs]
    proxied = [r["det"]["proxied_ms"] / r["local"]["proxied_ms"] for r in runs]
    out["ratio_vs_local"] = median(ratios)
    out["ratio_proxied_vs_local"] = median(proxied)
    out["margin_ms"] = TARGET_X * out["local_ready_ms"] - out["det_ready_ms"]
    out["meets_target"] = out["ratio_vs_local"] <= TARGET_X
    for side, c in conc.items():
        for key in ("users", "not_ready", "p50_ms", "p95_ms", "max_ms"):
            out[f"{side}_conc_{key}"] = c[key]
        if c["errors"]:
            out[f"{side}_conc_errors"] = c["errors"]
    out["conc_all_ready"] = all(c["not_ready"] == 0 for c in conc.values())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="kept rounds (a warm-up round more)")
    parser.add_argument("--users", type=int, default=20, help="users spawning at once")
    parser.add_argument("--conc-timeout", type=float, default=300, help="seconds all of them may take")
    parser.add_argument("--smoke", action="store_true", help="1 round, 3 users")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="work in DIR (made; kept afterwards) to read the master's and hubs' logs")
    args = parser.parse_args()
    rounds, users = (1, 3) if args.smoke else (args.rounds, args.users)
    why = _why_not()
    if why:
        emit({"bench": "bm10_hub", "skipped": why, "smoke": args.smoke, "peers": []})
        return
    # Both sides start the `jupyterhub-singleuser` of this venv: the agent finds it on PATH.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty (the hubs' databases would be reused)")
    with tempfile.TemporaryDirectory(prefix="bm10-") as tmp:
        work = Path(tmp) if args.keep is None else args.keep.resolve()
        work.mkdir(parents=True, exist_ok=True)
        os.chmod(work, 0o755)  # tasks may run as an unprivileged account and must reach their dirs
        got = run(rounds, users, args.conc_timeout, work)
    emit({"bench": "bm10_hub", "smoke": args.smoke, "rounds": rounds, "peers": [], "target_x": TARGET_X,
          **summarize(got["runs"], got["conc"]), "runs": got["runs"]})


if __name__ == "__main__":
    main()
