"""The few Kubernetes API calls the Kubernetes resource manager makes, through the official
Python client (``kubernetes``; imported only here, only when such a manager is configured).
Blocking: the manager calls them from threads (``call``: its own pool for the short ones)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger("det_jupyter.rm.kubernetes")

T = TypeVar("T")

#: Threads of the manager's own pool for its short API calls (``call``: creating the Secrets
#: and Jobs), apart from asyncio's default pool, which the master's other blocking work shares
#: (and which a kill's log-follower joins hold for seconds). BM-11's direct side creates its
#: Jobs from as many threads; with 12 on both sides each created Jobs twice as fast there, and
#: placed no faster (the kubelet starting the pods is the bottleneck).
API_THREADS = 6
#: Connections to the API server kept for reuse: the pool's calls, the log readers' tries
#: while their containers start (a few hundred pods at once) and the node sync. Beyond the
#: client's default (5 per CPU) each further concurrent call opened, and then dropped, a TLS
#: connection of its own.
API_CONNECTIONS = 64
_POOL = ThreadPoolExecutor(max(API_THREADS, 1), thread_name_prefix="k8s-api")
#: Tries a second, over all pods, to open the log of a container that may not have started
#: (``log_lines``; the manager tries each pod's every LOG_POLL_S until it opens). A try that
#: finds the container waiting costs the API server, etcd, the kubelet and the master together
#: about 8 ms of CPU (measured on the 2-core test bed): 200 pods starting at once, each tried 4
#: times a second, would ask for 6 CPU-seconds a second, and slowed the very starts they waited
#: for. Beyond this rate the tries queue (each pod in turn); the pods' watch still reports a
#: start, later.
LOG_TRIES_PER_S = 20.0
LOG_TRIES_BURST = 10


class Pace:
    """Spaces calls from any thread ``1 / rate`` apart, after a first ``burst`` at once."""

    def __init__(self, rate: float, burst: int = 1) -> None:
        self._gap = 1.0 / rate
        self._burst = burst
        self._next = 0.0
        self._lock = threading.Lock()

    def delay(self, now: float) -> float:
        """How long a call made at ``now`` is to wait (it takes its turn)."""
        with self._lock:
            at = max(self._next, now - (self._burst - 1) * self._gap)
            self._next = at + self._gap
        return max(0.0, at - now)

    def wait(self) -> None:
        time.sleep(self.delay(time.monotonic()))


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` (a blocking API call) in the manager's own thread pool."""
    return await asyncio.get_running_loop().run_in_executor(_POOL, functools.partial(fn, *args, **kwargs))


@dataclass(frozen=True)
class Node:
    """A node as the manager places on it."""

    name: str
    ready: bool
    address: str
    allocatable: dict[str, str]
    labels: dict[str, str]
    version: str
    unschedulable: bool


class KubeError(Exception):
    """A call the API server refused or could not answer; ``status`` 0 when unreachable."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class KubeApi:
    """``kubeconfig_path``: that file (empty: in-cluster credentials)."""

    def __init__(self, kubeconfig_path: str = "") -> None:
        try:
            from kubernetes import client, config
        except ImportError:
            raise SystemExit("det-jupyter: resource_manager.type kubernetes needs the kubernetes "
                             "package (pip install 'det-jupyter[kubernetes]')") from None
        settings = client.Configuration()
        try:
            if kubeconfig_path:
                config.load_kube_config(config_file=kubeconfig_path, client_configuration=settings)
            else:
                config.load_incluster_config(client_configuration=settings)
        except Exception as exc:  # the client raises several kinds
            raise SystemExit(f"det-jupyter: cannot load Kubernetes credentials from "
                             f"{kubeconfig_path or 'the pod (in-cluster)'}: {exc}") from None
        settings.connection_pool_maxsize = max(settings.connection_pool_maxsize or 0, API_CONNECTIONS)
        api_client = client.ApiClient(settings)
        self._client = client
        self._log_tries = Pace(LOG_TRIES_PER_S, LOG_TRIES_BURST)
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            raise KubeError(exc.status or 0, _reason(exc)) from None
        except OSError as exc:
            raise KubeError(0, f"cannot reach the Kubernetes API server ({exc})") from None

    def nodes(self) -> list[Node]:
        out = []
        for n in self._call(self.core.list_node).items:
            conditions = {c.type: c.status for c in n.status.conditions or ()}
            addresses = {a.type: a.address for a in n.status.addresses or ()}
            out.append(Node(
                name=n.metadata.name, ready=conditions.get("Ready") == "True",
                address=addresses.get("InternalIP") or addresses.get("Hostname") or n.metadata.name,
                allocatable=dict(n.status.allocatable or {}), labels=dict(n.metadata.labels or {}),
                version=(n.status.node_info.kubelet_version if n.status.node_info else ""),
                unschedulable=bool(n.spec.unschedulable)))
        return out

    def others_requests(self, label: str, value: str) -> dict[str, dict[str, float]]:
        """By node, what the live pods that are not ours (``label`` != ``value``) request:
        ``cpu`` (CPUs) and extended resources (``nvidia.com/gpu``...), summed over their
        containers (init containers aside, as the scheduler counts them in steady state)."""
        # Every pod of the cluster, every NODE_SYNC_S: read as plain JSON (the client's models
        # cost a millisecond a pod), from the API server's cache (resourceVersion 0), not etcd.
        resp = self._call(self.core.list_pod_for_all_namespaces, resource_version="0",
                          field_selector="status.phase!=Succeeded,status.phase!=Failed", _preload_content=False)
        try:
            found = json.loads(resp.data)
        finally:
            resp.release_conn()
        out: dict[str, dict[str, float]] = {}
        for pod in found.get("items") or ():
            spec = pod.get("spec") or {}
            node = spec.get("nodeName")
            if not node or ((pod.get("metadata") or {}).get("labels") or {}).get(label) == value:
                continue
            mine = out.setdefault(node, {})
            mine["pods"] = mine.get("pods", 0.0) + 1
            for c in spec.get("containers") or ():
                res = c.get("resources") or {}
                wanted = {**(res.get("limits") or {}), **(res.get("requests") or {})}
                for name, quantity in wanted.items():
                    if name == "cpu" or "/" in name:
                        mine[name] = mine.get(name, 0.0) + quantity_value(str(quantity))
        return out

    def create(self, namespace: str, secret: dict[str, Any], job: dict[str, Any]) -> None:
        """The Secret, then the Job (two calls: the manager deletes both, and a restarted
        master the ones it no longer knows)."""
        # Immutable: the kubelet reads it once and then stops watching it (a watch per pod's
        # Secret otherwise, for the pod's life); nothing changes it, and deleting it still works.
        self._call(self.core.create_namespaced_secret, namespace, {**secret, "immutable": True})
        try:
            self._call(self.batch.create_namespaced_job, namespace, job)
        except KubeError:
            self.delete_job(namespace, secret["metadata"]["name"])
            raise

    def delete_job(self, namespace: str, name: str) -> None:
        """The Job and (in the background, each with its grace period) its pods and Secret."""
        try:
            self._call(self.batch.delete_namespaced_job, name, namespace, propagation_policy="Background")
        except KubeError as exc:
            if exc.status != 404:
                raise
        try:
            self._call(self.core.delete_namespaced_secret, name, namespace)
        except KubeError as exc:
            if exc.status != 404:
                raise

    def jobs(self, namespace: str, selector: str) -> tuple[set[str], set[str]]:
        """The names of the Jobs, and of the Secrets, ``selector`` picks."""
        jobs = self._call(self.batch.list_namespaced_job, namespace, label_selector=selector).items
        secrets = self._call(self.core.list_namespaced_secret, namespace, label_selector=selector).items
        return {o.metadata.name for o in jobs}, {o.metadata.name for o in secrets}

    def warnings(self, namespace: str, kind: str, name: str) -> list[tuple[str, str]]:
        """The Warning events of object ``kind``/``name`` (a Job's ``FailedCreate``: the pod
        it could not make, and why), oldest first, as (reason, message)."""
        found = self._call(self.core.list_namespaced_event, namespace, field_selector=(
            f"involvedObject.kind={kind},involvedObject.name={name},type=Warning")).items

        def when(e: Any) -> str:
            stamp = e.last_timestamp or e.event_time or e.metadata.creation_timestamp
            return stamp.isoformat() if stamp is not None else ""

        return [(e.reason or "", e.message or "") for e in sorted(found, key=when)]

    def watch_pods(self, namespace: str, selector: str, on_event: Callable[[str, Any], None],
                   stop: threading.Event) -> None:
        """Call ``on_event(type, pod)`` for every change of the pods ``selector`` picks, until
        ``stop`` is set (reconnecting when the watch ends or fails)."""
        from kubernetes import watch

        while not stop.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(self.core.list_namespaced_pod, namespace, label_selector=selector,
                                      timeout_seconds=30):
                    on_event(event["type"], event["object"])
                    if stop.is_set():
                        break
            except Exception as exc:  # the API server went away: try again
                if not stop.is_set():
                    log.warning("watching pods in %s failed (%s); watching again", namespace, exc)
                    stop.wait(2.0)
            finally:
                w.stop()

    def log_lines(self, namespace: str, pod: str, container: str,
                  on_open: Callable[[], None] | None = None) -> Iterator[str | None]:
        """The container's log from its start, with timestamps, until it ends; ``None`` after
        each read's lines (the reader delivers what it has: nothing more may come for a while);
        ``on_open`` once the kubelet serves it (the container started: sooner than the pod's
        status says so). KubeError 400 while the container waits to start. Tries are paced
        (``LOG_TRIES_PER_S`` over all pods)."""
        self._log_tries.wait()
        resp = self._call(self.core.read_namespaced_pod_log, pod, namespace, container=container,
                          follow=True, timestamps=True, _preload_content=False)
        if on_open is not None:
            on_open()
        pending = b""
        try:
            for chunk in resp.stream(4096):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield join_partials(line).decode(errors="replace")
                yield None
            if pending:
                yield join_partials(pending).decode(errors="replace")
        finally:
            resp.release_conn()


#: Docker cuts a line longer than this into parts, and the log API then shows each part's own
#: timestamp where the cut was, on the same line.
PART = 16384
_STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")


def join_partials(line: bytes) -> bytes:
    """A timestamped log line (``<stamp> <text>``) with the stamps Docker's cuts put inside its
    text removed (every ``PART`` bytes of text), so a long line (a JSON report) is whole."""
    head = _STAMP.match(line)
    if head is None:
        return line
    start = head.end()
    out, rest = [line[:start]], line[start:]
    while len(rest) > PART:
        cut = _STAMP.match(rest, PART)
        if cut is None:
            break
        out.append(rest[:PART])
        rest = rest[cut.end():]
    out.append(rest)
    return b"".join(out)


def quantity_value(quantity: str) -> float:
    """A Kubernetes quantity as a number (``1500m`` -> 1.5, ``2`` -> 2.0, ``1k`` -> 1000)."""
    q = quantity.strip()
    scale = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3}
    for suffix in sorted(scale, key=len, reverse=True):
        if q.endswith(suffix):
            return float(q[: -len(suffix)] or 0) * scale[suffix]
    try:
        return float(q or 0)
    except ValueError:
        return 0.0


def _reason(exc: Any) -> str:
    import json

    try:
        body = json.loads(exc.body or "{}")
        return str(body.get("message") or exc.reason)
    except (ValueError, TypeError):
        return str(exc.reason)
