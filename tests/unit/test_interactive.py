"""Pure parts of notebooks: durations, settings, the JupyterLab command, tickets, idleness."""

from __future__ import annotations

import shlex

import pytest

from det_jupyter.server_ext._proxy import bad_path
from det_jupyter.services.interactive._common import (
    Activity,
    NotebookSettings,
    check_ticket,
    is_active,
    make_ticket,
    notebook_entrypoint,
    parse_duration,
)


@pytest.mark.parametrize("value,seconds", [
    ("20m", 1200.0), ("1h", 3600.0), ("30s", 30.0), ("1.5m", 90.0), (45, 45.0), ("500ms", 0.5),
    (None, None), ("", None),
])
def test_parse_duration(value, seconds) -> None:
    assert parse_duration(value, "idle_timeout") == seconds


@pytest.mark.parametrize("value", ["soon", "-5m", 0, True, "5 parsecs"])
def test_parse_duration_errors_name_the_key(value) -> None:
    with pytest.raises(ValueError, match="idle_timeout"):
        parse_duration(value, "idle_timeout")


def test_notebook_settings() -> None:
    s = NotebookSettings.parse({"idle_timeout": "10m", "notebook_idle_type": "activity"}, None)
    assert (s.idle_timeout_s, s.idle_type, s.work_dir) == (600.0, "activity", None)
    assert NotebookSettings.parse({}, 300.0).idle_timeout_s == 300.0  # the master's default
    with pytest.raises(ValueError, match="notebook_idle_type must be one of"):
        NotebookSettings.parse({"notebook_idle_type": "sometimes"}, None)
    with pytest.raises(ValueError, match="work_dir must be an absolute path"):
        NotebookSettings.parse({"work_dir": "relative"}, None)


def test_notebook_entrypoint() -> None:
    argv = notebook_entrypoint("nb-1", "10.0.0.5", 29400, "/data/nb/alice it's", allow_root=False)
    assert argv[:2] == ["sh", "-c"]
    mkdir, lab = argv[2].split(" && exec ")
    assert shlex.split(mkdir) == ["mkdir", "-p", "/data/nb/alice it's"]
    words = shlex.split(lab)
    assert words[:3] == ["python3", "-m", "jupyterlab"]
    assert {"--ServerApp.ip=10.0.0.5", "--ServerApp.port=29400", "--ServerApp.port_retries=0",
            "--ServerApp.base_url=/proxy/nb-1/", "--ServerApp.root_dir=/data/nb/alice it's",
            "--LabApp.workspaces_dir=/data/nb/alice it's/.jupyter/lab/workspaces"} <= set(words)
    assert not any("token" in w.lower() for w in words)  # the token travels in the environment


def test_tickets() -> None:
    t = make_ticket("s3cret", "nb-1", 7, expires=1000.0)
    assert check_ticket("s3cret", "nb-1", t, now=999.0) == 7
    assert check_ticket("s3cret", "nb-2", t, now=999.0) is None  # another notebook
    assert check_ticket("s3cret", "nb-1", t, now=1001.0) is None  # expired
    assert check_ticket("other", "nb-1", t, now=999.0) is None  # another master
    user, expiry, mac = t.split(".")
    assert check_ticket("s3cret", "nb-1", f"8.{expiry}.{mac}", now=999.0) is None  # altered
    assert check_ticket("s3cret", "nb-1", "garbage", now=0.0) is None


def act(**kw: object) -> Activity:
    base = {"kernels": 0, "busy_kernels": 0, "kernel_connections": 0, "terminals": 0,
            "sessions": 0, "last_activity": 1.0}
    base.update(kw)
    return Activity(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("idle_type,seen,previous,gpu,active", [
    ("kernels_or_terminals", act(), None, False, False),
    ("kernels_or_terminals", act(kernels=1), None, False, True),
    ("kernels_or_terminals", act(terminals=1), None, False, True),
    ("kernel_connections", act(kernels=2), None, False, False),
    ("kernel_connections", act(kernels=1, kernel_connections=1), None, False, True),
    ("kernel_connections", act(kernels=1, busy_kernels=1), None, False, True),  # a running cell
    ("activity", act(last_activity=5.0), act(last_activity=5.0), False, False),
    ("activity", act(last_activity=6.0), act(last_activity=5.0), False, True),
    ("activity", act(), None, False, True),  # nothing to compare with yet
    ("activity", act(last_activity=5.0), act(last_activity=5.0), True, True),  # GPU in use
])
def test_is_active(idle_type, seen, previous, gpu, active) -> None:
    assert is_active(idle_type, seen, previous, gpu) is active


@pytest.mark.parametrize("path,bad", [
    ("/proxy/nb/lab", False), ("/proxy/nb/../x", True), ("/proxy/nb/%2e%2e/x", True),
    ("/proxy/nb/%252e%252e/x", True), ("/proxy/nb/..%2fx", True), ("/proxy/nb/a\\..\\b", True),
    ("/proxy/nb/./x", True), ("/proxy/nb/files/a..b.txt", False),
])
def test_bad_path(path, bad) -> None:
    assert bad_path(path) is bad
