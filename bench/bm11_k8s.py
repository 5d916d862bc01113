"""BM-11: Kubernetes placements. One-slot trials placed through det-jupyter's Kubernetes resource
manager on the single-node test bed, against the same number of Jobs created directly with the
Python ``kubernetes`` client, in the same run.

The cluster: the test bed that is already up (scripts/k8s/up.sh; tests/_k8s.py's
``read_endpoints``), used as it is and left running; this benchmark never starts or stops it.
Everything runs in a namespace of its own (``bm11-<hex>``), deleted at the end. Without root,
the ``kubernetes`` client or a running test bed it prints a ``skipped`` summary.

How many: 200 a side (``--trials``), as the issue asks. The node's kubelet admits at most
``allocatable.pods`` pods at a time (250 on the test bed: scripts/k8s/up.sh's ``maxPods``; a
kubelet's default is 110), and the trials here run until the end of the round, so every side's
pods are live at once. ``--trials`` is capped to what fits beside the pods already on the node,
less a margin of 5 (another user's pods may come meanwhile); ``trials`` and ``capped_from`` say
what ran. Both sides run the same count. (Our manager offers no more slots on a node than its
kubelet admits pods, so on a node of 110 it would run 200 trials' worth only 100-odd at a time.)

The two sides, each with its own namespace-wide start (nothing of the other side left: a side
starts only once the namespace holds no pod), order rotating per round:
- ``ours``: a real master (``resource_manager: {type: kubernetes}``, ``slot_type: cpu``,
  ``slot_resource_requests.cpu: 0.01``, so the node's 2 CPUs are 200 slots, no
  ``max_slots_per_pod``, so the node is one agent; started once, untimed; as
  tests/integration/test_k8s_rm.py runs it) gets one experiment: random search,
  ``max_trials`` N, ``max_concurrent_trials: 0``, one slot per trial, entrypoint ``sleep 600``.
  Each trial is a Secret + a Job pinned (``nodeName``) to the node, whose pod runs
  ``python3 -m det_agent.pod``, which execs ``sleep``. ``local/hostusr:1`` with the host's /usr,
  this checkout and the venv's site-packages lent read-only (``cpu_pod_spec``), hostNetwork.
- ``direct``: N batch/v1 Jobs created with ``BatchV1Api.create_namespaced_job`` from a pool of
  as many threads as the manager's own pool for its API calls (``rm._kube_api.API_THREADS``, 6:
  what ``asyncio.to_thread``'s default pool, min(32, CPUs + 4), has on 2 cores, which the
  manager used before it had a pool of its own), so that both sides have the same number of
  create calls in flight; ours makes two per trial (its Secret, then its Job), direct one. The
  same pod as ours less the Secret holding the task spec (and its volume) and ``nodeName`` (the
  kube-scheduler places them, as it would a user's Jobs): the same image and volumes (the lent
  ones, an emptyDir at /run/determined, a hostPath as the master's checkpoint mount, a 4 GiB
  memory emptyDir at /dev/shm), hostNetwork, uid 65534, ``restartPolicy: Never``,
  ``backoffLimit: 0``, ``shareProcessNamespace``, a 10m CPU request, and the command
  ``python3 -c "import os, det_agent.pod; os.execvp('sleep', ...)"``: the interpreter and the
  bootstrap's imports that our pods start with, then the same ``sleep``, so that the two sides'
  pods cost the node the same and the ratio measures the manager (placement, the Secret, the
  spec and context it hands over, the log it reads), not Python starting on two cores.

Timed by one watch of the namespace's Jobs and pods in this process (the same observer for both
sides, counting only the side's own objects by label; raw JSON events, so it keeps up), and by
Kubernetes' own stamps (the Jobs' ``creationTimestamp``, the containers' ``startedAt``: whole
seconds, the same host's clock):
- submit: ours, the POST of the experiment sent; direct, the first create call (``time.time()``);
- ``*_placements_per_s`` = N / (submit -> the last container's ``startedAt``): placed and
  started, end to end; ``ratio_vs_direct`` = ours / direct (target >= 0.8; ``meets_target``);
- ``*_create_to_running_p50_s``/``p95_s``: per pod, its Job's ``creationTimestamp`` -> its
  container's ``startedAt`` (whole seconds);
- ``*_visible_per_s`` and ``*_create_to_visible_p50_ms``/``p95_ms``: the same to the moment the
  watch first sees the container running (Job ADDED -> that event): what a client of the API
  sees. Under load this trails ``startedAt`` by tens of seconds, on both sides: the kubelet's
  client rate limit (scripts/k8s/up.sh keeps 1.20's default ``kubeAPIQPS`` 5, burst 10) queues
  its status updates, and on our side also its read of each pod's Secret, which the container
  waits for (its log shows such reads ``Throttling request took 1.1s``);
- ``*_jobs_per_s`` = N / (submit -> the last Job's ADDED event) (``ratio_jobs_vs_direct``);
  ``*_first_job_s``: submit -> the first Job's (ours: the experiment's creation, its first
  trial's placement);
- ``*_cpu_s``: the CPU seconds each process of the test bed, our master, this process and the
  whole node (``node``: the pods' too) spent from submit to the last pod running: where a
  side's time went (for information; other users' work on the node shows in ``node``).
With more than one round, the figures are the medians of the rounds'.
Afterwards: the experiment killed (the manager deletes its Jobs), the direct Jobs deleted
(``DIRECT_THREADS`` threads), and the namespace until it holds no Job and no pod:
``*_drain_s`` (kill -> empty; for information, not a target).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from _common import emit, log, median, percentile

from det_jupyter.rm._kube_api import API_THREADS
from tests._k8s import SITE as K8S_SITE
from tests._k8s import Cluster, default_home, lent_pod_spec, read_endpoints, why_no_cluster
from tests._master import MasterProcess, create_experiment

IMAGE = "local/hostusr:1"
SITE = K8S_SITE
CPU_PER_SLOT = 0.01  # the node's 2 CPUs: 200 one-slot trials fit
CONTAINER = "determined-container"
LABEL_CLUSTER = "det-jupyter.ai/cluster"  # on every object our manager makes
DIRECT_THREADS = API_THREADS  # as many create calls in flight as our manager's pool has
POD_MARGIN = 5  # pods left free for others on the node
TARGET_X = 0.8
SIDES = ("ours", "direct")
RUN_TIMEOUT_S = 300.0
DRAIN_TIMEOUT_S = 240.0


def cpu_pod_spec() -> dict[str, Any]:
    """``task_container_defaults.cpu_pod_spec`` of our master (the integration tests')."""
    return lent_pod_spec(SITE)


def _volumes() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    spec = cpu_pod_spec()["spec"]
    return list(spec["containers"][0]["volumeMounts"]), list(spec["volumes"])


DIRECT_BOOT = "import os, det_agent.pod; os.execvp('sleep', ['sleep', '600'])"


def direct_job(name: str, namespace: str) -> Any:
    """A Job with the pod our manager makes, less the Secret and nodeName (module doc). A plain
    dict (``Any``: the client takes one where its annotations say ``V1Job``)."""
    mounts, volumes = _volumes()
    uid = 65534
    pod = {
        "metadata": {"labels": {"bm11": "direct"}},
        "spec": {
            "hostNetwork": True, "restartPolicy": "Never", "automountServiceAccountToken": False,
            "shareProcessNamespace": True, "terminationGracePeriodSeconds": 10,
            "securityContext": {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid, "runAsNonRoot": True},
            "containers": [{
                "name": CONTAINER, "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                # What our pod's bootstrap costs its container (the interpreter, det_agent.pod's
                # imports, then an exec of the task), less reading its spec and the context:
                # so that the sides differ in the manager, not in what the pod runs.
                "command": ["python3", "-c", DIRECT_BOOT],
                "env": list(cpu_pod_spec()["spec"]["containers"][0]["env"]),  # PYTHONPATH, as ours
                "resources": {"requests": {"cpu": f"{int(CPU_PER_SLOT * 1000)}m"}},
                "volumeMounts": [*mounts, {"name": "det-run", "mountPath": "/run/determined"},
                                 {"name": "det-host-0", "mountPath": "/bm11"},
                                 {"name": "det-shm", "mountPath": "/dev/shm"}],
                "securityContext": {"runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": True,
                                    "allowPrivilegeEscalation": False, "privileged": False},
            }],
            "volumes": [*volumes, {"name": "det-run", "emptyDir": {}},
                        {"name": "det-host-0", "hostPath": {"path": tempfile.gettempdir()}},
                        {"name": "det-shm", "emptyDir": {"medium": "Memory", "sizeLimit": str(4 << 30)}}],
        },
    }
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"bm11": "direct"}},
            "spec": {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}}


def experiment_config(trials: int) -> dict[str, Any]:
    return {
        "name": "bm11", "entrypoint": "sleep 600", "max_restarts": 0,
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": {"name": "random", "metric": "loss", "smaller_is_better": True,
                     "max_trials": trials, "max_concurrent_trials": 0},
        "resources": {"slots_per_trial": 1},
    }


# -- the observer ------------------------------------------------------------------------------


class Watcher:
    """When each Job and pod of a namespace was first seen, and when each pod's container first
    ran, on ``time.time()`` (two watch threads reading the raw event stream: the client's model
    deserialisation would fall behind on 2 busy cores), with Kubernetes' own stamps beside them
    (one-second resolution) as a check on the watch's lag. ``side`` (set per run) names the
    pods and Jobs counted: ours carry the manager's cluster label, direct ones ``bm11: direct``."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.namespace = namespace
        self.side = ""
        self.jobs: dict[str, tuple[float, float]] = {}  # Job name -> (ADDED, creationTimestamp)
        self.pods: dict[str, str] = {}  # pod name -> its Job's name
        self.running: dict[str, tuple[float, float]] = {}  # pod name -> (seen running, startedAt)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(fn, cb), daemon=True)
                         for fn, cb in ((self.batch.list_namespaced_job, self._job),
                                        (self.core.list_namespaced_pod, self._pod))]

    def __enter__(self) -> Watcher:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _watch(self, fn: Any, on_event: Any) -> None:
        while not self._stop.is_set():
            try:
                resp = fn(self.namespace, watch=True, timeout_seconds=10, _preload_content=False)
                try:
                    pending = b""
                    for chunk in resp.stream(65536):
                        now = time.time()
                        pending += chunk
                        *lines, pending = pending.split(b"\n")
                        for line in lines:
                            if line.strip():
                                event = json.loads(line)
                                on_event(event["type"], event["object"], now)
                        if self._stop.is_set():
                            break
                finally:
                    resp.release_conn()
            except Exception as exc:  # the watch broke: watch again (first sightings are kept)
                log(f"watch of {self.namespace} broke ({exc}); watching again")
                time.sleep(0.5)

    def _mine(self, obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return ("bm11" in labels) if self.side == "direct" else (LABEL_CLUSTER in labels)

    def _job(self, kind: str, job: dict[str, Any], now: float) -> None:
        with self._lock:
            if kind != "DELETED" and self._mine(job):
                self.jobs.setdefault(job["metadata"]["name"], (now, _stamp(job["metadata"]["creationTimestamp"])))

    def _pod(self, kind: str, pod: dict[str, Any], now: float) -> None:
        with self._lock:
            if kind == "DELETED" or not self._mine(pod):
                return
            name = pod["metadata"]["name"]
            self.pods.setdefault(name, (pod["metadata"].get("labels") or {}).get("job-name", ""))
            for cs in (pod.get("status") or {}).get("containerStatuses") or ():
                state = cs.get("state") or {}
                started = (state.get("running") or state.get("terminated") or {}).get("startedAt")
                if started:
                    self.running.setdefault(name, (now, _stamp(started)))

    def reset(self, side: str) -> None:
        with self._lock:
            self.side = side
            self.jobs.clear()
            self.pods.clear()
            self.running.clear()

    def count_running(self) -> int:
        with self._lock:
            return sum(1 for p in self.running if self.pods.get(p) in self.jobs)

    def figures(self, n: int, submit: float) -> dict[str, Any]:
        with self._lock:
            jobs, pods = dict(self.jobs), dict(self.pods)
            running = {p: t for p, t in self.running.items() if pods.get(p) in jobs}
        stamped = [t[1] - jobs[pods[p]][1] for p, t in running.items()]
        seen = [(t[0] - jobs[pods[p]][0]) * 1000 for p, t in running.items()]
        out: dict[str, Any] = {"side": self.side, "n": n, "jobs_seen": len(jobs), "pods_running": len(running)}
        if len(running) >= n and len(jobs) >= n:
            last_start = max(t[1] for t in running.values())
            out["placements_per_s"] = n / (last_start - submit) if last_start > submit else None
            out["visible_per_s"] = n / (max(t[0] for t in running.values()) - submit)
            out["jobs_per_s"] = n / (max(t[0] for t in jobs.values()) - submit)
            out["first_job_s"] = min(t[0] for t in jobs.values()) - submit
        if stamped:
            out["create_to_running_p50_s"] = percentile(stamped, 50)
            out["create_to_running_p95_s"] = percentile(stamped, 95)
            out["create_to_visible_p50_ms"] = percentile(seen, 50)
            out["create_to_visible_p95_ms"] = percentile(seen, 95)
        return out


def _stamp(text: str) -> float:
    """An RFC 3339 time of the API (``2026-11-29T15:47:51Z``) as a POSIX time."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- the sides ---------------------------------------------------------------------------------


def run_ours(master: MasterProcess, watcher: Watcher, n: int, cpu: CpuMeter) -> dict[str, Any]:
    admin = master.admin()
    watcher.reset("ours")
    cpu.mark()
    submit = time.time()
    exp = create_experiment(admin, yaml.safe_dump(experiment_config(n)), None)["experiment"]["id"]
    try:
        _until_running(watcher, n, lambda: master.log()[-3000:])
        figures = {**watcher.figures(n, submit), "cpu_s": cpu.since_mark()}
    finally:
        t0 = time.time()
        admin.post(f"/api/v1/experiments/{exp}/kill")
        _drain(watcher)
    return {**figures, "drain_s": time.time() - t0}


def run_direct(watcher: Watcher, n: int, tag: str, cpu: CpuMeter) -> dict[str, Any]:
    watcher.reset("direct")
    names = [f"bm11-{tag}-{i}" for i in range(n)]
    cpu.mark()
    submit = time.time()
    with ThreadPoolExecutor(DIRECT_THREADS) as pool:
        list(pool.map(lambda name: watcher.batch.create_namespaced_job(
            watcher.namespace, direct_job(name, watcher.namespace)), names))
    try:
        _until_running(watcher, n, lambda: "")
        figures = {**watcher.figures(n, submit), "cpu_s": cpu.since_mark()}
    finally:
        t0 = time.time()
        with ThreadPoolExecutor(DIRECT_THREADS) as pool:
            list(pool.map(lambda name: watcher.batch.delete_namespaced_job(
                name, watcher.namespace, propagation_policy="Background"), names))
        _drain(watcher)
    return {**figures, "drain_s": time.time() - t0}


class CpuMeter:
    """CPU seconds (user + system, from /proc) that each process of the test bed, our master
    and this process (the watch; the direct side's creates) spent since ``mark``, and the whole
    machine's (``node``: every process, the pods' included): where a side's time went. For
    information: the two sides share the 2 cores with whatever else runs there."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._mark: dict[str, float] = {}

    def read(self) -> dict[str, float]:
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for name, pid in self.pids.items():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            except (OSError, IndexError, ValueError):
                continue
        with open("/proc/stat") as f:
            total = [int(x) for x in f.readline().split()[1:]]
        out["node"] = (sum(total[:8]) - total[3] - total[4]) / tick  # less idle and iowait
        return out

    def mark(self) -> None:
        self._mark = self.read()

    def since_mark(self) -> dict[str, float]:
        return {k: round(v - self._mark[k], 2) for k, v in self.read().items() if k in self._mark}


def bed_pids(cluster: Cluster) -> dict[str, int]:
    """The test bed's processes by component (up.sh's run/pids)."""
    out = {}
    for path in sorted((cluster.home / "run" / "pids").glob("*")):
        try:
            out[path.name] = int(path.read_text())
        except (OSError, ValueError):
            continue
    return out


def _until_running(watcher: Watcher, n: int, context: Any) -> None:
    deadline = time.time() + RUN_TIMEOUT_S
    while watcher.count_running() < n:
        if time.time() > deadline:
            raise RuntimeError(f"only {watcher.count_running()} of {n} pods running after "
                               f"{RUN_TIMEOUT_S:.0f} s:\n{context()}")
        time.sleep(0.05)


def _drain(watcher: Watcher) -> None:
    """Until the namespace holds no Job and no pod (the next side starts on an empty node)."""
    deadline = time.time() + DRAIN_TIMEOUT_S
    while time.time() < deadline:
        jobs = watcher.batch.list_namespaced_job(watcher.namespace).items
        pods = watcher.core.list_namespaced_pod(watcher.namespace).items
        if not jobs and not pods:
            return
        time.sleep(1.0)
    log(f"warning: {watcher.namespace} still holds Jobs or pods after {DRAIN_TIMEOUT_S:.0f} s")


# -- the run -----------------------------------------------------------------------------------


def fitting(cluster: Cluster, wanted: int) -> int:
    """How many pods fit on the node beside those on it now, less POD_MARGIN."""
    core = cluster.core_v1()
    node = core.read_node(cluster.node)
    allocatable = int(node.status.allocatable.get("pods", "110"))
    busy = [p for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={cluster.node}").items
            if p.status.phase not in ("Succeeded", "Failed")]
    return max(0, min(wanted, allocatable - len(busy) - POD_MARGIN))


def master_config(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return {
        "resource_manager": {"type": "kubernetes", "default_namespace": namespace,
                             "kubeconfig_path": str(cluster.kubeconfig), "slot_type": "cpu",
                             "slot_resource_requests": {"cpu": CPU_PER_SLOT}},
        "task_container_defaults": {"image": IMAGE, "cpu_pod_spec": cpu_pod_spec()},
    }


def run(cluster: Cluster, n: int, rounds: int, work: Path) -> list[dict[str, Any]]:
    core = cluster.core_v1()
    namespace = f"bm11-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": namespace}})
    log(f"namespace {namespace}; {n} pods a side, {rounds} round(s)")
    (work / "master.yaml").write_text(yaml.safe_dump(master_config(cluster, namespace)))
    master = MasterProcess(work / "data", extra_args=["--no-agent", "--config", str(work / "master.yaml")])
    results: list[dict[str, Any]] = []
    try:
        master.start()
        admin = master.admin()
        deadline = time.time() + 60
        while not admin.get("/api/v1/agents")["agents"]:
            if time.time() > deadline:
                raise RuntimeError(f"the node did not show as an agent:\n{master.log()[-3000:]}")
            time.sleep(0.2)
        assert master.proc is not None
        cpu = CpuMeter({**bed_pids(cluster), "master": master.proc.pid, "bench": os.getpid()})
        with Watcher(cluster, namespace) as watcher:
            for r in range(rounds):
                order = SIDES if r % 2 == 0 else SIDES[::-1]
                got: dict[str, Any] = {"round": r, "order": list(order)}
                for side in order:
                    figures = (run_ours(master, watcher, n, cpu) if side == "ours"
                               else run_direct(watcher, n, f"r{r}", cpu))
                    log(f"round {r} {side}: {figures}")
                    got[side] = figures
                results.append(got)
    finally:
        master.stop()
        try:
            from kubernetes import client, config

            batch = client.BatchV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
            batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
        finally:
            core.delete_namespace(namespace)
            log(f"namespace {namespace} deleted")
    return results


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = ("placements_per_s", "visible_per_s", "jobs_per_s", "first_job_s", "create_to_running_p50_s",
            "create_to_running_p95_s", "create_to_visible_p50_ms", "create_to_visible_p95_ms", "drain_s")
    for side in SIDES:
        for key in keys:
            out[f"{side}_{key}"] = median([r[side][key] for r in results if r[side].get(key) is not None])
    for side in SIDES:
        parts = sorted({k for r in results for k in r[side].get("cpu_s", {})})
        out[f"{side}_cpu_s"] = {k: median([r[side]["cpu_s"][k] for r in results if k in r[side].get("cpu_s", {})])
                                for k in parts}
    for ratio, key in (("ratio_vs_direct", "placements_per_s"), ("ratio_visible_vs_direct", "visible_per_s"),
                       ("ratio_jobs_vs_direct", "jobs_per_s")):
        ours, direct = out[f"ours_{key}"], out[f"direct_{key}"]
        out[ratio] = ours / direct if ours and direct else None
    out["meets_target"] = out["ratio_vs_direct"] is not None and out["ratio_vs_direct"] >= TARGET_X
    out["complete"] = all(r[s]["pods_running"] >= r[s]["n"] for r in results for s in SIDES)
    return out


def why_not() -> str | None:
    reason = why_no_cluster()
    if reason:
        return reason
    if read_endpoints(default_home()) is None:
        return (f"no Kubernetes test bed is up in {default_home()} (start one with `bash scripts/k8s/up.sh` "
                "as root; this benchmark neither starts nor stops it)")
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="trials (and Jobs) a side; capped to the node")
    parser.add_argument("--rounds", type=int, default=1, help="rounds, the sides' order rotating")
    parser.add_argument("--smoke", action="store_true", help="1 round, 5 trials a side")
    args = parser.parse_args()
    # A SIGTERM (`timeout`, a CI's stop) unwinds like Ctrl-C: the master stopped, the namespace deleted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    wanted, rounds = (5, 1) if args.smoke else (args.trials, args.rounds)
    why = why_not()
    if why:
        emit({"bench": "bm11_k8s", "skipped": why, "smoke": args.smoke, "peers": []})
        return
    cluster = read_endpoints(default_home())
    assert cluster is not None
    n = fitting(cluster, wanted)
    if n < 1:
        emit({"bench": "bm11_k8s", "skipped": f"no room on node {cluster.node}: its pod limit is reached",
              "smoke": args.smoke, "peers": []})
        return
    with tempfile.TemporaryDirectory(prefix="bm11-") as tmp:
        results = run(cluster, n, rounds, Path(tmp))
    emit({"bench": "bm11_k8s", "smoke": args.smoke, "peers": [], "trials": n,
          "capped_from": wanted if n < wanted else None, "rounds": rounds, "target_x": TARGET_X,
          "direct_threads": DIRECT_THREADS, **summarize(results), "runs": results})


if __name__ == "__main__":
    main()
