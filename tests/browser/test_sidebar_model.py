"""The sidebar's notebook and TensorBoard rows (``labextension/src/model.ts``), as pure functions
of API bodies: run by Node on the compiled ``labextension/lib/model.js``, no browser, no master.
Skips without Node or the compiled module (``scripts/build_labextension.sh`` makes it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._master import REPO

MODEL = REPO / "labextension" / "lib" / "model.js"
NODE = shutil.which("node")

if NODE is None or not MODEL.is_file():
    pytest.skip(f"needs node and {MODEL} (scripts/build_labextension.sh)", allow_module_level=True)


def call(tmp_path: Path, fn: str, *args: Any) -> Any:
    """``fn(*args)`` from model.js, through JSON."""
    module = tmp_path / "model.mjs"  # lib/ is ES modules under a package without "type"
    module.write_text(MODEL.read_text())
    script = (f"import * as m from {json.dumps(module.as_uri())};\n"
              f"process.stdout.write(JSON.stringify(m.{fn}(...{json.dumps(list(args))})));\n")
    out = subprocess.run([str(NODE), "--input-type=module", "-e", script], capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout)


NOTEBOOKS = {"notebooks": [
    {"id": "nb-old", "description": "old", "state": "STATE_RUNNING", "username": "alice",
     "startTime": "2026-01-01T00:00:00Z", "serviceAddress": "/proxy/nb-old/"},
    {"id": "nb-new", "description": "new", "state": "STATE_STARTING", "username": "alice",
     "startTime": "2026-01-02T00:00:00Z"},
    {"id": "nb-q", "description": "q", "state": "STATE_QUEUED", "username": "alice",
     "startTime": "2026-01-01T12:00:00Z"},
    {"id": "nb-gone", "description": "gone", "state": "STATE_TERMINATED", "username": "alice",
     "startTime": "2026-01-03T00:00:00Z", "exitStatus": "killed"},
    {"id": "nb-bob", "description": "bob's", "state": "STATE_RUNNING", "username": "bob",
     "startTime": "2026-01-03T00:00:00Z"},
]}
TENSORBOARDS = {"tensorboards": [
    {"id": "tb-1", "description": "TensorBoard (x)", "state": "STATE_RUNNING", "username": "alice",
     "startTime": "2026-01-05T00:00:00Z", "experimentIds": [3, 4], "trialIds": []},
]}


def test_task_rows_keep_the_users_live_tasks_notebooks_first_newest_first(tmp_path: Path) -> None:
    rows = call(tmp_path, "taskRows", NOTEBOOKS, TENSORBOARDS, "alice")
    assert [(r["id"], r["kind"], r["state"]) for r in rows] == [
        ("nb-new", "notebook", "starting"), ("nb-q", "notebook", "queued"),
        ("nb-old", "notebook", "running"), ("tb-1", "tensorboard", "running")]
    assert rows[3]["title"] == "tensorboard tb-1; experiments 3, 4"
    assert rows[0]["title"] == "notebook nb-new"


def test_task_rows_without_a_username_or_a_tensorboard_route(tmp_path: Path) -> None:
    # Username unknown: everything the master listed (an admin's: everyone's) that has not ended.
    ids = [r["id"] for r in call(tmp_path, "taskRows", NOTEBOOKS, None, None)]
    assert ids == ["nb-bob", "nb-new", "nb-q", "nb-old"]
    # A master without either route (getOptional's null for a 404): no rows.
    assert call(tmp_path, "taskRows", None, None, "alice") == []
    assert call(tmp_path, "taskRows", {}, {"tensorboards": "nonsense"}, "alice") == []


def test_task_links(tmp_path: Path) -> None:
    assert call(tmp_path, "taskUrl", "http://h:1/base/", "notebook", "nb-1", "1.2.a+b") == \
        "http://h:1/base/proxy/nb-1/lab?det_ticket=1.2.a%2Bb"
    assert call(tmp_path, "taskUrl", "http://h:1", "tensorboard", "tb-1", "t") == \
        "http://h:1/proxy/tb-1/?det_ticket=t"
    # The master's proxyUrl (the proxy's own origin) wins; anything but an http(s) URL of a
    # /proxy/ path is ignored for the master's own /proxy/ path (which redirects there).
    assert call(tmp_path, "taskUrl", "http://h:1/base/", "notebook", "nb-1", "t", "http://h:2/proxy/nb-1/") == \
        "http://h:2/proxy/nb-1/lab?det_ticket=t"
    assert call(tmp_path, "taskUrl", "http://h:1", "tensorboard", "tb-1", "t", "http://h:2/proxy/tb-1") == \
        "http://h:2/proxy/tb-1/?det_ticket=t"
    for bad in ("javascript:alert(1)//http://h:2/proxy/", "//evil/proxy/x/", "http://evil", 7, None):
        assert call(tmp_path, "taskUrl", "http://h:1", "notebook", "nb-1", "t", bad) == \
            "http://h:1/proxy/nb-1/lab?det_ticket=t"
    assert call(tmp_path, "taskPath", "tensorboard", "tb-1") == "api/v1/tensorboards/tb-1"
    assert call(tmp_path, "taskPath", "notebook", "nb-1") == "api/v1/notebooks/nb-1"


def test_names_show_invisible_characters_as_escapes(tmp_path: Path) -> None:
    # The sidebar sets text with textContent (markup shows as typed); bidi overrides, zero-width
    # and control characters in a name are written as escapes, as the det CLI shows them.
    assert call(tmp_path, "visible", "a\u202eb\0<svg onload=x>\U000e0001 Équipe 模型") == \
        "a\\u202eb\\0<svg onload=x>\\U000e0001 Équipe 模型"
    rows = call(tmp_path, "experimentRows", {"experiments": [
        {"id": 1, "name": "gpj.\u202eexe", "searcherMetric": "lo\u200bss"}]})
    assert (rows[0]["name"], rows[0]["metric"]) == ("gpj.\\u202eexe", "lo\\u200bss")
    jobs = call(tmp_path, "jobRows", {"jobs": [{"name": "j\x1b[2J", "resourcePool": "p\u2066",
                                                "waitReason": "w\n"}]})
    assert (jobs[0]["name"], jobs[0]["pool"], jobs[0]["wait"]) == ("j\\x1b[2J", "p\\u2066", "w\\n")
    tasks = call(tmp_path, "taskRows", {"notebooks": [
        {"id": "nb-1", "description": "d\u202e", "state": "STATE_RUNNING"}]}, None, None)
    assert tasks[0]["description"] == "d\\u202e"
