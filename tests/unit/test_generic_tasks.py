"""Generic tasks' pure parts: the config check, a fork's merge and the state table."""

from __future__ import annotations

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.interactive.generic import (
    NEXT,
    GenericConfig,
    GenericState,
    after_exit,
    merge_fork,
)

S = GenericState


def test_config_becomes_a_commands_config() -> None:
    cfg = GenericConfig.parse(
        {
            "entrypoint": ["python3", "x.py"],
            "resources": {"slots": 0, "max_slots": 4},
            "work_dir": "/w",
            "preemption_timeout": 30,
        }
    )
    assert cfg.command_config == {
        "entrypoint": ["python3", "x.py"],
        "resources": {"slots": 0},
        "environment": {},
        "description": "Generic Task",
    }
    assert cfg.user_config["work_dir"] == "/w"
    assert GenericConfig.parse({"entrypoint": "make run"}).command_config["entrypoint"] == [
        "make run"
    ]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ([1], "YAML mapping"),
        ({}, "entrypoint"),
        ({"entrypoint": []}, "entrypoint"),
        ({"entrypoint": [1]}, "entrypoint"),
        ({"entrypoint": ["x"], "searcher": {}}, "searcher"),
        ({"entrypoint": ["x"], "resources": 3}, "resources"),
    ],
)
def test_bad_configs_name_what_is_wrong(raw: object, says: str) -> None:
    with pytest.raises(InvalidRequest, match=says):
        GenericConfig.parse(raw)


def test_a_fork_replaces_top_level_keys() -> None:
    forked = {"entrypoint": ["a"], "resources": {"slots": 2, "priority": 3}}
    assert merge_fork({"resources": {"slots": 0}}, forked) == {
        "entrypoint": ["a"],
        "resources": {"slots": 0},
    }
    assert merge_fork(None, forked) == forked


@pytest.mark.parametrize(
    ("request_", "start", "end"),
    [
        ("pause", S.ACTIVE, S.STOPPING_PAUSED),
        ("pause", S.PAUSED, None),
        ("pause", S.COMPLETED, None),
        ("unpause", S.PAUSED, S.ACTIVE),
        ("unpause", S.STOPPING_PAUSED, S.ACTIVE),
        ("unpause", S.ACTIVE, None),
        ("kill", S.ACTIVE, S.STOPPING_CANCELED),
        ("kill", S.PAUSED, S.STOPPING_CANCELED),
        ("kill", S.CANCELED, None),
        ("kill", S.COMPLETED, None),
    ],
)
def test_transitions(request_: str, start: GenericState, end: GenericState | None) -> None:
    assert NEXT[request_].get(start) is end


@pytest.mark.parametrize(
    ("state", "code", "end"),
    [
        (S.STOPPING_PAUSED, 137, S.PAUSED),
        (S.STOPPING_CANCELED, 137, S.CANCELED),
        (S.ACTIVE, 0, S.COMPLETED),
        (S.ACTIVE, 1, S.ERROR),
        (S.ACTIVE, None, S.ERROR),
    ],
)
def test_after_exit(state: GenericState, code: int | None, end: GenericState) -> None:
    assert after_exit(state, code) is end
