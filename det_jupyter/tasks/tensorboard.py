"""``python3 -m det_jupyter.tasks.tensorboard``: the program a TensorBoard task runs.

1. Finds its trials: those of ``--experiment`` ids (re-listed on every refresh, so new trials of
   a running search appear) and the ``--trial`` ids, over the master's REST API with the task's
   allocation token (``DET_MASTER``, ``DET_SESSION_TOKEN``). The master lets a TensorBoard task
   read exactly the experiments and trials it was started on.
2. Writes each trial's stored training and validation metrics as TensorBoard scalars into
   ``<logdir>/experiment_<e>/trial_<t>``, and copies in the event files the trial wrote itself
   where its experiment's checkpoint storage is ``shared_fs``
   (``<host_path>[/<storage_path>]/<cluster_id>/tensorboard/experiment/<e>/trial/<t>``, the
   layout of Determined's tensorboard sync). It refreshes every ``--refresh`` seconds until
   every trial has ended.
3. Serves TensorBoard in this process (``--path_prefix /proxy/<task id>``, no network access
   beyond the master, no update checks) on ``--bind:--port``. Every request must carry
   ``Authorization: token $DET_PROXY_TOKEN`` — the upstream token only the master's proxy
   sends — or gets 403: the port is reachable from the network, the data is not.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

from ._events import RunWriter, mirror_event_files, scalars_from_workloads

log = logging.getLogger("det_jupyter.tasks.tensorboard")

_TERMINAL = {"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"}


class Master:
    """GETs of the master's REST API as this task (its allocation token)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}

    def get(self, path: str) -> Any:
        req = urllib.request.Request(self.url + path, headers=self._headers)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")


def tensorboard_dir(storage: dict[str, Any], cluster_id: str, exp_id: int, trial_id: int) -> str | None:
    """Where a trial's own event files are synced, for ``shared_fs`` storage (else None)."""
    if not isinstance(storage, dict) or storage.get("type") != "shared_fs" or not storage.get("host_path"):
        return None
    base = os.path.join(str(storage["host_path"]), str(storage.get("storage_path") or ""))
    return os.path.join(base, cluster_id, "tensorboard", "experiment", str(exp_id),
                        "trial", str(trial_id))


class Refresher:
    """Keeps ``logdir`` in step with the trials' stored metrics."""

    def __init__(self, master: Master, logdir: str, experiments: Iterable[int],
                 trials: Iterable[int], cluster_id: str = "") -> None:
        self._master = master
        self._logdir = logdir
        self._experiments = list(experiments)
        self._trials = list(trials)
        self._cluster_id = cluster_id
        self._writers: dict[int, RunWriter] = {}
        self._done: set[int] = set()
        self._storage: dict[int, Any] = {}

    def _trial_list(self) -> list[dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for e in self._experiments:
            for t in self._master.get(f"/api/v1/experiments/{e}/trials").get("trials", []):
                out[t["id"]] = t
        for tid in self._trials:
            if tid not in out:
                out[tid] = self._master.get(f"/api/v1/trials/{tid}")["trial"]
        return list(out.values())

    def _storage_of(self, exp_id: int) -> Any:
        if exp_id not in self._storage:
            cfg = self._master.get(f"/api/v1/experiments/{exp_id}").get("config") or {}
            self._storage[exp_id] = cfg.get("checkpoint_storage") or {}
        return self._storage[exp_id]

    def refresh(self) -> bool:
        """One pass over every trial; True when all of them have ended and been written."""
        for trial in self._trial_list():
            tid, eid = int(trial["id"]), int(trial["experimentId"])
            if tid in self._done:
                continue
            ended = trial.get("state") in _TERMINAL  # read before the metrics: none missed
            run = os.path.join(self._logdir, f"experiment_{eid}", f"trial_{tid}")
            if tid not in self._writers:
                self._writers[tid] = RunWriter(run)
            workloads = self._master.get(f"/api/v1/trials/{tid}/workloads").get("workloads", [])
            self._writers[tid].write(scalars_from_workloads(workloads))
            own = tensorboard_dir(self._storage_of(eid), self._cluster_id, eid, tid)
            if own is not None:
                mirror_event_files(own, run)
            if ended:
                self._done.add(tid)
        return bool(self._writers) and self._done >= set(self._writers)

    def loop(self, interval: float, stop: threading.Event) -> None:
        """Refresh until every trial has ended (experiments: until they have no live trial)."""
        while not stop.is_set():
            try:
                finished = self.refresh()
            except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
                log.warning("refreshing the metrics failed (retrying): %s", exc)
                finished = False
            if finished and not self._experiments:
                return
            stop.wait(interval)


def require_token(app: Callable, token: str) -> Callable:
    """WSGI middleware: only requests with the upstream token get through (403 otherwise)."""
    expected = f"token {token}".encode()

    def guarded(environ: dict, start_response: Callable) -> Iterable[bytes]:
        got = environ.get("HTTP_AUTHORIZATION", "").encode()
        if not token or not hmac.compare_digest(got, expected):
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"forbidden: reach this TensorBoard through the det master's proxy\n"]
        return app(environ, start_response)

    return guarded


def serve(logdir: str, bind: str, port: int, base_url: str, token: str, reload_s: int) -> None:
    from tensorboard import default, program

    class GuardedServer(program.WerkzeugServer):
        def __init__(self, wsgi_app: Callable, flags: Any) -> None:
            super().__init__(require_token(wsgi_app, token), flags)

    tb = program.TensorBoard(plugins=default.get_plugins(), server_class=GuardedServer)
    tb.configure(argv=[
        "tensorboard", "--logdir", logdir, "--host", bind, "--port", str(port),
        "--path_prefix", base_url.rstrip("/"), "--reload_interval", str(reload_s),
        "--load_fast", "false", "--window_title", "det-jupyter TensorBoard",
    ])
    sys.exit(tb.main())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m det_jupyter.tasks.tensorboard")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bind", required=True, help="address to listen on")
    p.add_argument("--base-url", required=True, help="the proxy's path: /proxy/<task id>/")
    p.add_argument("--experiment", type=int, action="append", default=[])
    p.add_argument("--trial", type=int, action="append", default=[])
    p.add_argument("--logdir", default=os.path.join(os.getcwd(), "tensorboard-logs"))
    p.add_argument("--refresh", type=float, default=5.0, help="seconds between metric refreshes")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args(argv)
    try:
        import tensorboard  # noqa: F401  (only checked here: the clearest place to fail)
    except ImportError:
        sys.exit("the tensorboard package is not installed in this task's environment; install "
                 "it where tasks run: pip install 'det-jupyter[tensorboard]'")
    token = os.environ.get("DET_PROXY_TOKEN", "")
    if not token:
        sys.exit("DET_PROXY_TOKEN is not set: refusing to serve an unauthenticated TensorBoard")
    master = Master(os.environ["DET_MASTER"], os.environ["DET_SESSION_TOKEN"])
    refresher = Refresher(master, args.logdir, args.experiment, args.trial,
                          os.environ.get("DET_CLUSTER_ID", ""))
    os.makedirs(args.logdir, exist_ok=True)
    try:
        refresher.refresh()  # the first pass before serving: the first page shows data
    except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
        log.warning("the first metrics refresh failed (retrying): %s", exc)
    stop = threading.Event()
    threading.Thread(target=refresher.loop, args=(args.refresh, stop), daemon=True).start()
    serve(args.logdir, args.bind, args.port, args.base_url, token, max(1, int(args.refresh)))


if __name__ == "__main__":
    main()
