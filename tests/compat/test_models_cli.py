"""The stock CLI's model registry against det-jupyter: ``det model create|list|describe|
register-version|list-versions|move|delete`` exit 0 and change what the master reports; the
master's answers parse with the stock bindings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests._master import (
    ADMIN_PASSWORD,
    ApiError,
    Client,
    MasterProcess,
    create_experiment,
    wait_experiment,
)
from tests.integration._exp import COUNTER, counter_config

pytestmark = pytest.mark.compat
ADMIN = {"user": "admin", "password": ADMIN_PASSWORD}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MasterProcess, str]]:
    """A master and the uuid of the last checkpoint of a finished experiment."""
    m = MasterProcess(tmp_path_factory.mktemp("models-cli") / "master").start()
    try:
        admin = m.admin()
        exp_id = create_experiment(admin, counter_config(length=10, sleep=0.01), COUNTER)["experiment"]["id"]
        assert wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
        ckpts = admin.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
        best = max((c for c in ckpts if c["state"] == "STATE_COMPLETED"),
                   key=lambda c: c["metadata"]["steps_completed"])
        yield m, best["uuid"]
    finally:
        m.stop()


def _ok(res: Any) -> str:
    assert res.returncode == 0, f"exit {res.returncode}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    assert "Traceback" not in res.stderr
    return res.stdout


def _names(client: Client) -> list[str]:
    return [m["name"] for m in client.get("/api/v1/models")["models"]]


def test_stock_model_commands(det_env, finished: tuple[MasterProcess, str]) -> None:
    m, uuid = finished
    admin = m.admin()
    det = lambda *argv: det_env.det(list(argv), m.url, **ADMIN)  # noqa: E731

    out = _ok(det("model", "create", "stock-model", "--description", "from the stock CLI"))
    assert "stock-model" in out and "from the stock CLI" in out
    created = json.loads(_ok(det("model", "create", "stock-json", "--json")))
    assert created["name"] == "stock-json" and created["archived"] is False
    assert set(_names(admin)) == {"stock-model", "stock-json"}

    listed = _ok(det("model", "list"))
    assert "stock-model" in listed and "stock-json" in listed
    det_env.check_shape("v1GetModelsResponse", admin.get("/api/v1/models"))

    out = _ok(det("model", "register-version", "stock-model", uuid))
    assert uuid in out
    assert admin.get("/api/v1/models/stock-model")["model"]["numVersions"] == 1
    # --json posts to /api/v1/models/{id}/versions: the model's id in the path.
    version = json.loads(_ok(det("model", "register-version", "stock-model", uuid, "--json")))
    assert version["modelVersion"]["version"] == 2
    det_env.check_shape("v1PostModelVersionResponse", version)

    described = _ok(det("model", "describe", "stock-model"))
    assert "stock-model" in described and uuid in described
    versions = _ok(det("model", "list-versions", "stock-model"))
    assert versions.count(uuid) == 2
    as_json = json.loads(_ok(det("model", "list-versions", "stock-model", "--json")))
    assert [v["version"] for v in as_json["modelVersions"]] == [1, 2]
    det_env.check_shape("v1GetModelVersionsResponse", as_json)
    det_env.check_shape("v1GetModelResponse", admin.get("/api/v1/models/stock-model"))

    try:
        ws = admin.post("/api/v1/workspaces", {"name": "stock-ws"})["workspace"]["id"]
    except ApiError as exc:
        if exc.status not in (404, 405):
            raise
        ws = None
    if ws is not None:
        _ok(det("model", "move", "stock-model", "-w", "stock-ws"))
        assert admin.get("/api/v1/models/stock-model")["model"]["workspaceId"] == ws
        _ok(det("model", "create", "in-ws", "-w", "stock-ws"))
        assert admin.get("/api/v1/models/in-ws")["model"]["workspaceId"] == ws

    bad = det("model", "register-version", "stock-json", "00000000-0000-0000-0000-000000000000")
    assert bad.returncode != 0 and "not found" in bad.stdout + bad.stderr

    _ok(det("model", "delete", "stock-model"))
    assert "stock-model" not in _names(admin)
    missing = det("model", "describe", "stock-model")
    assert missing.returncode != 0 and "not found" in missing.stdout + missing.stderr
