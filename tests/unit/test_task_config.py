"""``--config-file`` + ``--config key=value`` (Determined's override semantics), pure."""

from __future__ import annotations

import pytest

from det_jupyter.cli.det._task_config import ConfigError, apply_overrides, parse_value, task_config
from det_jupyter.cli.det._tasks import waiting_text

FILE = """
description: from the file
resources:
  slots: 2
  resource_pool: gpu
idle_timeout: 20m
environment:
  environment_variables: [A=1]
"""


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("1.5", 1.5), ("true", True), ("20m", "20m"), ("a,b", ["a", "b"]),
    ("1,x", [1, "x"]), ("", None), ("A=1", "A=1"),
])
def test_values_are_yaml(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_overrides_win_over_the_file_and_later_ones_win() -> None:
    out = task_config(FILE, ["resources.slots=0", "idle_timeout=30", "idle_timeout=45s",
                             "notebook_idle_type=activity"])
    assert out == {
        "description": "from the file",
        "resources": {"slots": 0, "resource_pool": "gpu"},
        "idle_timeout": "45s",
        "notebook_idle_type": "activity",
        "environment": {"environment_variables": ["A=1"]},
    }


def test_environment_variables_are_always_a_list() -> None:
    out = task_config(FILE, ["environment.environment_variables=B=2"])
    assert out["environment"] == {"environment_variables": ["B=2"]}
    out = task_config(None, ["environment.environment_variables=B=2,C=3"])
    assert out == {"environment": {"environment_variables": ["B=2", "C=3"]}}


def test_no_file_and_nested_keys_are_created() -> None:
    assert task_config(None, ["resources.slots=0", "resources.priority=10"]) == {
        "resources": {"slots": 0, "priority": 10}}
    assert task_config("", []) == {}


def test_the_input_is_not_changed() -> None:
    base = {"resources": {"slots": 1}}
    apply_overrides(base, ["resources.slots=4"])
    assert base == {"resources": {"slots": 1}}


@pytest.mark.parametrize(("entry", "message"), [
    ("resources.slots", "expected key=value"),
    ("=1", "expected key=value"),
    ("resources..slots=1", "expected key=value"),
    ("description.x=1", "description is 'from the file', not a mapping"),
])
def test_bad_entries_say_which(entry: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        task_config(FILE, [entry])


@pytest.mark.parametrize(("text", "message"), [("- a\n- b\n", "must hold a YAML mapping"),
                                               ("a: [\n", "not valid YAML")])
def test_bad_files(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        task_config(text, [], "nb.yaml")


@pytest.mark.parametrize(("state", "reason", "text"), [
    ("QUEUED", "behind job job-1 (priority 10)", "queued: behind job job-1 (priority 10)"),
    ("QUEUED", None, "queued: waiting for a free slot"),
    ("STARTING", None, "starting JupyterLab"),
    ("RUNNING", None, "running"),
])
def test_waiting_text_says_why(state: str, reason: str | None, text: str) -> None:
    assert waiting_text(state, reason, "JupyterLab") == text


def test_sdk_task_fields_from_the_wire() -> None:
    from det_jupyter.client import Command, Notebook, notebook_url

    cmd = Command(None, "cmd-1", {"state": "STATE_TERMINATED", "exitStatus": "exited with code 3"})  # type: ignore[arg-type]
    assert (cmd.state, cmd.exit_code) == ("TERMINATED", 3)
    culled = Notebook(None, "nb-1", {"state": "STATE_TERMINATED",  # type: ignore[arg-type]
                                     "exitStatus": "culled: idle for 31 s (idle_timeout 30 s)"})
    assert culled.exit_code is None and culled.service_address == "/proxy/nb-1/"
    assert notebook_url("http://m:8080/", "nb-1", "1.2.x") == "http://m:8080/proxy/nb-1/lab?det_ticket=1.2.x"
    assert notebook_url("http://m:8080", "nb-1", None) == "http://m:8080/proxy/nb-1/lab"
