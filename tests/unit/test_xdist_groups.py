"""The suite's own layout: every test module using a session-wide resource (the wheel, the
private Docker daemon, the Kubernetes test bed) is in tests/conftest.py's SHARED_RESOURCE, so
that under xdist those modules run on one worker and the resource is made once."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SHARED_RESOURCE

ROOT = Path(__file__).resolve().parents[2]
USES = {"wheel": re.compile(r"\b(wheel|wheel_env)\s*:"),
        "docker": re.compile(r"\bdocker_engine\s*:|getfixturevalue\(\"docker_engine\"\)"),
        "k8s": re.compile(r"\bk8s_cluster\s*:")}


def test_every_module_sharing_a_session_resource_is_grouped() -> None:
    found = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        text = path.read_text()
        for resource, pattern in USES.items():
            if pattern.search(text):
                found[str(path.relative_to(ROOT))] = resource
    assert found == SHARED_RESOURCE
