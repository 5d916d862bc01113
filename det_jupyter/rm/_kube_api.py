"""The few Kubernetes API calls the Kubernetes resource manager makes, through the official
Python client (``kubernetes``; imported only here, only when such a manager is configured).
Blocking: the manager calls them from worker threads."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("det_jupyter.rm.kubernetes")


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
        try:
            if kubeconfig_path:
                api_client = config.new_client_from_config(config_file=kubeconfig_path)
            else:
                config.load_incluster_config()
                api_client = client.ApiClient()
        except Exception as exc:  # the client raises several kinds
            raise SystemExit(f"det-jupyter: cannot load Kubernetes credentials from "
                             f"{kubeconfig_path or 'the pod (in-cluster)'}: {exc}") from None
        self._client = client
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
        out: dict[str, dict[str, float]] = {}
        found = self._call(self.core.list_pod_for_all_namespaces,
                           field_selector="status.phase!=Succeeded,status.phase!=Failed")
        for pod in found.items:
            node = pod.spec.node_name
            if not node or (pod.metadata.labels or {}).get(label) == value:
                continue
            mine = out.setdefault(node, {})
            mine["pods"] = mine.get("pods", 0.0) + 1
            for c in pod.spec.containers or ():
                res = c.resources
                wanted = {**(res.limits or {}), **(res.requests or {})} if res is not None else {}
                for name, quantity in wanted.items():
                    if name == "cpu" or "/" in name:
                        mine[name] = mine.get(name, 0.0) + quantity_value(str(quantity))
        return out

    def create(self, namespace: str, secret: dict[str, Any], job: dict[str, Any]) -> None:
        """The Secret, then the Job (two calls: the manager deletes both, and a restarted
        master the ones it no longer knows)."""
        self._call(self.core.create_namespaced_secret, namespace, secret)
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

    def jobs(self, namespace: str, selector: str) -> list[str]:
        """The names of the Jobs, and of the Secrets, ``selector`` picks."""
        jobs = self._call(self.batch.list_namespaced_job, namespace, label_selector=selector).items
        secrets = self._call(self.core.list_namespaced_secret, namespace, label_selector=selector).items
        return sorted({o.metadata.name for o in [*jobs, *secrets]})

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
        status says so). KubeError 400 while the container waits to start."""
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
