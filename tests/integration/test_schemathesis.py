"""Schemathesis over the OpenAPI document the master serves, with every check: no server
error, every status and error body as documented, valid requests accepted and invalid ones
refused, 405 with ``Allow`` for other methods, no operation that answers without credentials —
and no response body that shows a traceback, SQL or where the master keeps its data.

CI runs a few examples per operation (``DET_SCHEMATHESIS_EXAMPLES``, default 3); the full run
(docs/api.md) is ``DET_SCHEMATHESIS_EXAMPLES=100 .venv/bin/python -m pytest -q
tests/integration/test_schemathesis.py``. The master runs without an agent: what the run
launches (notebooks, commands) is queued, never started.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests._master import MasterProcess

EXAMPLES = int(os.environ.get("DET_SCHEMATHESIS_EXAMPLES", "3"))
SEED = int(os.environ.get("DET_SCHEMATHESIS_SEED", "20261124"))
HOOKS = "tests.integration._schemathesis_hooks"
#: Not JSON operations: the proxy, the shells' tunnel and the agents' websocket have their own
#: hardening tests (test_proxy_origin, test_shells, test_remote_agent).
EXCLUDED_PATHS = r"^/(proxy|det-jupyter|agents)(/|$)"
LEAKS = [re.compile(p) for p in (r"Traceback \(most recent call last\)", r"\bSELECT\s", r"\bINSERT INTO\b",
                                 r"sqlite3\.", r"psycopg", r'File "/')]

#: Operations whose bodies carry a document in another language, checked by the master as
#: Determined checks it (an experiment's YAML config, a task's config): a request the OpenAPI
#: schema allows may still be refused (400) for what the config says. Only these may answer
#: 400 to a request that matches the document.
CONFIG_CHECKED = {
    "POST /api/v1/experiments": "the YAML config must be a valid experiment config",
    "POST /api/v1/commands": "the task config must be valid (entrypoint, resources, environment)",
    "POST /api/v1/notebooks": "the task config must be valid",
    "POST /api/v1/shells": "the task config must be valid",
    "POST /api/v1/tensorboards": "the task config must be valid",
}


def _config(master: MasterProcess, token: str, pinned_token: int, report_dir: Path) -> str:
    ops = []
    for name, why in CONFIG_CHECKED.items():
        method, path = name.split(" ", 1)
        ops.append(f"""
[[operations]]
include-method = "{method}"
include-path = "{path}"
# {why}
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409"]
""")
    return f"""
base-url = "{master.url}"
seed = {SEED}
workers = 2
request-timeout = 60
continue-on-failure = true

[generation]
max-examples = {EXAMPLES}
# The master refuses NUL in any string (PostgreSQL's text cannot hold it): a 400 that names it.
allow-x00 = false

[auth.openapi.bearer]
bearer = "{token}"

[reports]
directory = "{report_dir}"

[reports.json]
enabled = true

[reports.har]
enabled = true

[[operations]]
include-method = "PATCH"
include-path = "/api/v1/tokens/{{token_id}}"
# Only a token of its own: revoking the run's token would end the run.
parameters = {{ "path.token_id" = {pinned_token} }}

[[operations]]
include-method = "GET"
include-path = "/api/v1/job-queues-v2"
# A pool of this cluster: another name is a 400 that lists the pools.
parameters = {{ "query.resourcePool" = "default" }}
{''.join(ops)}
"""


def run_schemathesis(master: MasterProcess, work: Path, examples: int = EXAMPLES) -> dict[str, Any]:
    """Run schemathesis over the master's document; returns the run's figures and the
    failures and leaks it found."""
    admin = master.admin()
    # Access tokens: logging out and password changes (which the run does) leave them alone.
    token = admin.post("/api/v1/tokens", {"lifespan": "1d", "description": "schemathesis"})["token"]
    pinned = admin.post("/api/v1/tokens", {"lifespan": "1d", "description": "schemathesis target"})
    doc = admin.get("/api/v1/openapi.json")
    work.mkdir(parents=True, exist_ok=True)
    schema = work / "openapi.json"
    schema.write_text(json.dumps(doc))
    report_dir = work / "report"
    shutil.rmtree(report_dir, ignore_errors=True)
    config = work / "schemathesis.toml"
    config.write_text(_config(master, token, pinned["tokenId"], report_dir))
    has_links = any("links" in resp for item in doc["paths"].values() for op in item.values()
                    if isinstance(op, dict) for resp in op.get("responses", {}).values())
    phases = "examples,coverage,fuzzing" + (",stateful" if has_links else "")
    argv = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run", str(schema),
            "--checks", "all", "--phases", phases, "--max-examples", str(examples),
            "--exclude-path-regex", EXCLUDED_PATHS, "--report", "json,har"]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": HOOKS, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work, timeout=3600)
    (work / "schemathesis.out").write_text(proc.stdout + proc.stderr)
    report = json.loads(next(report_dir.glob("*.json")).read_text())
    return {"returncode": proc.returncode, "output": proc.stdout + proc.stderr, "report": report,
            "leaks": _leaks(next(report_dir.glob("*.har")), master), "phases": phases}


def _leaks(har: Path, master: MasterProcess) -> list[str]:
    """Responses that show a traceback, SQL or a path of the master's data dir."""
    data_dir = str(master.data_dir.resolve())
    found = []
    for entry in json.loads(har.read_text())["log"]["entries"]:
        content = entry["response"].get("content", {})
        text = content.get("text") or ""
        if content.get("encoding") == "base64":
            text = base64.b64decode(text).decode(errors="replace")
        hits = [p.pattern for p in LEAKS if p.search(text)] + (["data dir"] if data_dir in text else [])
        if hits:
            found.append(f"{entry['request']['method']} {entry['request']['url'][:120]} -> "
                         f"{entry['response']['status']}: {', '.join(hits)}: {text[:200]!r}")
    return found


def summary(result: dict[str, Any]) -> str:
    """Operations, cases and failures by check, from the run's JSON report."""
    report = result["report"]
    failures = Counter(f.get("check") or f.get("title") for f in _failures(report))
    return json.dumps({"phases": result["phases"], "stats": report.get("stats", report.get("summary")),
                       "failures_by_check": dict(failures), "leaks": len(result["leaks"])}, indent=1)


def _failures(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for op in report.get("operations", {}).values() if isinstance(report.get("operations"), dict) else []:
        out.extend(op.get("failures", []))
    return out or list(report.get("failures", []))


@pytest.mark.timeout(3600)
def test_schemathesis_over_the_served_document(tmp_path: Path) -> None:
    master = MasterProcess(tmp_path / "master", extra_args=["--no-agent"]).start()
    try:
        result = run_schemathesis(master, tmp_path / "st")
    finally:
        master.stop()
    print(summary(result))
    assert not result["leaks"], "\n".join(result["leaks"][:20])
    assert result["returncode"] == 0, result["output"][-12000:]
    assert "Traceback" not in master.log(), master.log()[-5000:]
