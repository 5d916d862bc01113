"""The Kubernetes API wrapper's own logic (rm._kube_api), without a cluster: the pace of log
tries over all pods, what others' pods take from each node (read as plain JSON), and the
Secret created immutable."""

from __future__ import annotations

import json
from typing import Any

import pytest

from det_jupyter.rm._kube_api import KubeApi, Pace


@pytest.mark.parametrize(("rate", "burst", "calls", "waits"), [
    (10.0, 1, [0.0, 0.0, 0.0], [0.0, 0.1, 0.2]),  # one at a time, 0.1 s apart
    (10.0, 3, [5.0, 5.0, 5.0, 5.0], [0.0, 0.0, 0.0, 0.1]),  # after idling: 3 at once, then paced
    (10.0, 1, [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]),  # callers slower than the pace never wait
])
def test_pace_spaces_calls_after_a_burst(rate: float, burst: int, calls: list[float], waits: list[float]) -> None:
    pace = Pace(rate, burst)
    assert [round(pace.delay(now), 3) for now in calls] == waits


class _Raw:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()
        self.released = False

    def release_conn(self) -> None:
        self.released = True


class _Core:
    """``CoreV1Api``'s two calls used here, recording their arguments."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.raw = _Raw({"items": pods})
        self.asked: list[tuple[str, Any, dict[str, Any]]] = []

    def list_pod_for_all_namespaces(self, **kwargs: Any) -> _Raw:
        self.asked.append(("list_pods", None, kwargs))
        return self.raw

    def create_namespaced_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self.asked.append(("secret", namespace, body))


class _Batch:
    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []

    def create_namespaced_job(self, namespace: str, body: dict[str, Any]) -> None:
        self.jobs.append(body)


def _api(core: _Core, batch: _Batch | None = None) -> KubeApi:
    api = KubeApi.__new__(KubeApi)  # no kubeconfig: the calls go to the doubles
    api.core, api.batch = core, batch or _Batch()  # type: ignore[assignment]
    return api


def _pod(node: str | None, labels: dict[str, str], *containers: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"nodeName": node, "containers": list(containers)}}


def test_others_requests_sums_what_other_pods_take_per_node_from_plain_json() -> None:
    core = _Core([
        _pod("n1", {"app": "web"}, {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
             {"resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}, "requests": {"cpu": "250m"}}}),
        _pod("n1", {}, {}),  # no resources: counts as a pod only
        _pod("n2", {"det-jupyter.ai/cluster": "c1"}, {"resources": {"requests": {"cpu": "1"}}}),  # ours
        _pod(None, {}, {"resources": {"requests": {"cpu": "1"}}}),  # not on a node yet
    ])
    got = _api(core).others_requests("det-jupyter.ai/cluster", "c1")
    assert got == {"n1": {"pods": 2.0, "cpu": 0.75, "nvidia.com/gpu": 1.0}}
    (_, _, kwargs), = core.asked
    # From the API server's cache, live pods only, not deserialised into the client's models.
    assert kwargs["resource_version"] == "0" and kwargs["_preload_content"] is False
    assert kwargs["field_selector"] == "status.phase!=Succeeded,status.phase!=Failed"
    assert core.raw.released


def test_the_secret_is_created_immutable_before_its_job() -> None:
    core, batch = _Core([]), _Batch()
    api = _api(core, batch)
    secret = {"metadata": {"name": "det-x-0"}, "stringData": {"spec.json": "{}"}}
    api.create("ns", secret, {"metadata": {"name": "det-x-0"}})
    assert core.asked == [("secret", "ns", {**secret, "immutable": True})]
    assert batch.jobs == [{"metadata": {"name": "det-x-0"}}]
    assert "immutable" not in secret  # the caller's manifest is left as it was
