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

import json
import os
import shutil
import subprocess
import sys
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
#: Operations whose bodies carry a document in another language, checked by the master as
#: Determined checks it (an experiment's YAML config, a task's config): a request the OpenAPI
#: schema allows may still be refused (400) for what the config says; and the allocation CSVs,
#: whose windows must be real times in order. Only these may answer 400 to a request that
#: matches the document.
CONFIG_CHECKED = {
    "POST /api/v1/experiments": "the YAML config must be a valid experiment config",
    "POST /api/v1/commands": "the task config must be valid (entrypoint, resources, environment)",
    "POST /api/v1/notebooks": "the task config must be valid",
    "POST /api/v1/shells": "the task config must be valid",
    "POST /api/v1/tensorboards": "the task config must be valid",
    # a template is a partial config: its keys must be ones an experiment or a task config takes
    "POST /api/v1/templates/{name}": "the template's config keys must be known config keys",
    "PUT /api/v1/templates/{name}": "the template's config keys must be known config keys",
    "PATCH /api/v1/templates/{name}": "the template's config keys must be known config keys",
    # a config policy is a YAML document of invariant config and constraints
    "PUT /api/v1/config-policies/global/{workload}": "the policy must be YAML with known fields",
    "PUT /api/v1/config-policies/workspaces/{ws_id}/{workload}": "the policy must be YAML with known fields",
    # not a body, but the same kind of check: the window's ends must be real times, in order
    "GET /resources/allocation/raw": "the window's ends must be real times, the start first",
    "GET /resources/allocation/allocations-csv": "the window's ends must be real times, the start first",
    "GET /resources/allocation/aggregated": "the dates must be real days (or months), the start first",
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
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "413"]
""")
    return f"""
base-url = "{master.url}"
seed = {SEED}
# One worker: with two, Hypothesis describes filters by parsing lambda sources (ast.parse) in
# both threads at once, which CPython 3.11 can fail with "AST constructor recursion depth
# mismatch" (a SystemError inside the tool, reported as a run error).
workers = 1
request-timeout = 60
continue-on-failure = true

[generation]
max-examples = {EXAMPLES}
# The master refuses NUL in any string (PostgreSQL's text cannot hold it): a 400 that names it.
allow-x00 = false

# A body over its route's limit is a 413 (documented on every operation that takes a body):
# JSON schema cannot say how large a body the limit allows, so a request the document allows
# may meet it, and a refused one may be refused for its size first.
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422"]

[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "413"]

[auth.openapi.bearer]
bearer = "{token}"

[reports]
directory = "{report_dir}"

[reports.json]
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
            "--exclude-path-regex", EXCLUDED_PATHS, "--report", "json"]
    leaks = work / "leaks.jsonl"
    leaks.unlink(missing_ok=True)
    # The hooks scan every response body (after_call) for what they name as leaks and the data dir.
    env = {**os.environ, "SCHEMATHESIS_HOOKS": HOOKS, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "DET_ST_LEAKS": str(leaks), "DET_ST_DATA_DIR": str(master.data_dir.resolve())}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work, timeout=3 * 3600)
    (work / "schemathesis.out").write_text(proc.stdout + proc.stderr)
    # Schemathesis names its report json-<time>.json.
    report = json.loads(next(report_dir.glob("json-*.json")).read_text())
    found = leaks.read_text().splitlines() if leaks.exists() else []
    scanned = int((work / "leaks.jsonl.count").read_text())
    return {"returncode": proc.returncode, "output": proc.stdout + proc.stderr, "report": report,
            "leaks": found, "bodies_scanned": scanned, "phases": phases, "examples": examples}


def summary(result: dict[str, Any]) -> str:
    """Operations, test cases and failures by kind, from the run's JSON report."""
    report = result["report"]
    return json.dumps({
        "phases": result["phases"], "examples_per_operation": result["examples"],
        "running_time_s": round(report.get("running_time", 0)), "operations": report.get("operations"),
        "test_cases": report.get("test_cases"),
        "failures": {f"{f['code']} {f['title']}": f["count"] for f in report.get("failures", [])},
        "errors": {e["title"]: e["count"] for e in report.get("errors", [])},
        # dropped by the hooks' filter_failure: body-wide rules broken under undeclared keys
        "filtered": report.get("filtered"),
        "bodies_scanned": result["bodies_scanned"], "leaks": len(result["leaks"])}, indent=1)


@pytest.mark.timeout(600 if EXAMPLES <= 5 else 4 * 3600)
def test_schemathesis_over_the_served_document(tmp_path: Path) -> None:
    master = MasterProcess(tmp_path / "master", extra_args=["--no-agent"]).start()
    try:
        result = run_schemathesis(master, tmp_path / "st")
    finally:
        master.stop()
    figures = summary(result)
    (tmp_path / "st" / "summary.json").write_text(figures)
    print(figures)
    assert result["bodies_scanned"] > 0
    assert not result["leaks"], "\n".join(result["leaks"][:20])
    assert result["returncode"] == 0, result["output"][-12000:]
    assert "Traceback" not in master.log(), master.log()[-5000:]
