"""API fuzzing from the OpenAPI document: every operation, called as the admin with hostile
path values, query strings and bodies, answers a 4xx with a JSON message that says what is
wrong — never a 5xx, never a traceback — and what was stored before is still there.

CI runs a few cases per operation; the full run (documented in the README):
``DET_FUZZ_CASES=200 .venv/bin/python -m pytest -q tests/integration/test_api_fuzz.py``.
"""

from __future__ import annotations

import http.client
import json
import os
import random
from typing import Any
from urllib.parse import quote, urlparse

from tests._master import Client, MasterProcess

CASES = int(os.environ.get("DET_FUZZ_CASES", "4"))
SEED = int(os.environ.get("DET_FUZZ_SEED", "20261124"))

PATH_VALUES = ["0", "-1", "999999999999999999999", "1e9", "abc", "..", "%2e%2e%2f", "%00", "💥",
               "a" * 3000, "1;DROP TABLE users", "null", "true", "${jndi:x}", "{}", " ", "%20"]
JSON_VALUES: list[Any] = [None, True, 0, -1, 2**63, 1.5e308, "", "x" * 100_000, "💥\u0000", [], [None],
                          {}, {"a": {"b": {"c": []}}}, [[[[[[]]]]]], "../../etc/passwd"]
KEYS = ["name", "config", "workspaceId", "projectId", "id", "userId", "limit", "offset", "password",
        "username", "user", "labels", "metadata", "checkpointUuid", "roleIds", "updates", "logs",
        "experimentIds", "trialIds", "files", "modelDefinition", "template", "lifespan", "active",
        "admin", "destinationProjectId", "destinationWorkspaceId", "description", "notes", "priority"]


def _random_body(rng: random.Random) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice([b"", b"{", b"[]", b"null", b"\xff\xfe", b'"string"', b"{" * 5000])
    if kind == 1:
        return json.dumps(rng.choice(JSON_VALUES)).encode()
    body = {rng.choice(KEYS): rng.choice(JSON_VALUES) for _ in range(rng.randrange(1, 6))}
    return json.dumps(body).encode()


def _random_query(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return ""
    pairs = [(rng.choice(["limit", "offset", "states", "name", "follow", "orderBy", "trialIds",
                          "metricNames", "archived", "workspaceIds", "users"]),
              rng.choice(["-5", "abc", "1e99", "", "💥", "x" * 2000, "ORDER_BY_ASC", "true"]))
             for _ in range(rng.randrange(1, 4))]
    return "?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs)


def _call(master: MasterProcess, token: str, verb: str, path: str, body: bytes | None) -> tuple[int, bytes, str]:
    u = urlparse(master.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn.request(verb, u.path.rstrip("/") + path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read(1_000_000)
    ctype = resp.getheader("Content-Type") or ""
    conn.close()
    return resp.status, data, ctype


def test_fuzz_every_operation(master: MasterProcess) -> None:
    admin = master.admin()
    token = admin.token
    assert token
    exp_before = admin.get("/api/v1/experiments")["pagination"]["total"]
    users_before = len(admin.get("/api/v1/users")["users"])
    doc = admin.get("/api/v1/openapi.json")
    rng = random.Random(SEED)
    failures, calls = [], 0
    for template, item in sorted(doc["paths"].items()):
        if template.startswith(("/proxy/", "/det-jupyter/", "/agents")):
            continue  # not JSON APIs: the proxy and tunnel have their own hardening tests
        params = item.get("parameters", [])
        for verb, op in item.items():
            if verb not in ("get", "post", "put", "patch", "delete") or op.get("x-det-websocket"):
                continue
            if template == "/api/v1/auth/logout":
                continue  # would end the fuzzer's own session
            for _ in range(CASES):
                path = template
                for p in params:
                    path = path.replace("{" + p["name"] + "}", quote(rng.choice(PATH_VALUES), safe="%"))
                path += _random_query(rng)
                body = None if verb in ("get", "delete") else _random_body(rng)
                status, data, ctype = _call(master, token, verb.upper(), path, body)
                calls += 1
                where = f"{verb.upper()} {path[:120]} body={(body or b'')[:80]!r}"
                if status >= 500:
                    failures.append(f"{where} -> {status}: {data[:200]!r}")
                elif status >= 400 and "json" in ctype:
                    try:
                        msg = json.loads(data).get("message")
                    except (ValueError, AttributeError):
                        msg = None
                    if not msg or "Traceback" in str(msg):
                        failures.append(f"{where} -> {status} without a message: {data[:200]!r}")
    assert calls > 100
    assert not failures, f"{len(failures)} of {calls} calls:\n" + "\n".join(failures[:60])
    # Nothing stored before was lost; the master still answers.
    fresh = Client(master.url, master.login())
    assert fresh.get("/api/v1/experiments")["pagination"]["total"] >= exp_before
    assert len(fresh.get("/api/v1/users")["users"]) >= users_before
    assert "Traceback" not in master.log()
