"""The few Kubernetes API calls the Kubernetes resource manager makes, through the official
Python client (``kubernetes``; imported only here, only when such a manager is configured).
Blocking: the manager calls them from worker threads."""

from __future__ import annotations

import logging
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

    def create(self, namespace: str, secret: dict[str, Any], job: dict[str, Any]) -> None:
        """The Secret, then the Job, then the Secret owned by the Job (deleting the Job takes it)."""
        self._call(self.core.create_namespaced_secret, namespace, secret)
        made = self._call(self.batch.create_namespaced_job, namespace, job)
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": made.metadata.name,
                 "uid": made.metadata.uid, "blockOwnerDeletion": False}
        self._call(self.core.patch_namespaced_secret, secret["metadata"]["name"], namespace,
                   {"metadata": {"ownerReferences": [owner]}})

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

    def jobs(self, namespace: str, selector: str) -> list[Any]:
        return list(self._call(self.batch.list_namespaced_job, namespace, label_selector=selector).items)

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

    def log_lines(self, namespace: str, pod: str, container: str) -> Iterator[str]:
        """The container's log from its start, with timestamps, until it ends."""
        resp = self._call(self.core.read_namespaced_pod_log, pod, namespace, container=container,
                          follow=True, timestamps=True, _preload_content=False)
        pending = b""
        try:
            for chunk in resp.stream(4096):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode(errors="replace")
            if pending:
                yield pending.decode(errors="replace")
        finally:
            resp.release_conn()


def _reason(exc: Any) -> str:
    import json

    try:
        body = json.loads(exc.body or "{}")
        return str(body.get("message") or exc.reason)
    except (ValueError, TypeError):
        return str(exc.reason)
