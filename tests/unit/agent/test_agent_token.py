"""det-agent's token sources (never argv unless asked for), --task-user, and what Agent hands
its ProcessRuntime."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from det_agent import Agent, Slot
from det_agent.__main__ import parse_args

MASTER = ["--master", "http://127.0.0.1:1"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DET_AGENT_TOKEN", "DET_AGENT_TOKEN_FILE", "DET_AGENT_TASK_USER", "DET_MASTER"):
        monkeypatch.delenv(name, raising=False)


def _token_file(tmp_path: Path, text: str = "s3cret\n") -> Path:
    path = tmp_path / "agent_token"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_token_file_flag(tmp_path: Path) -> None:
    path = _token_file(tmp_path)
    args = parse_args([*MASTER, "--token-file", str(path)])
    assert (args.token, args.token_file, args.token_in_argv) == ("s3cret", str(path), False)


def test_token_file_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _token_file(tmp_path)
    monkeypatch.setenv("DET_AGENT_TOKEN_FILE", str(path))
    args = parse_args(MASTER)
    assert (args.token, args.token_file) == ("s3cret", str(path))


def test_token_from_the_environment_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_AGENT_TOKEN", "from-env")
    args = parse_args(MASTER)
    assert (args.token, args.token_file, args.token_in_argv) == ("from-env", None, False)
    assert "DET_AGENT_TOKEN" not in os.environ  # tasks and children never inherit it


def test_token_flag_still_works_and_is_flagged() -> None:
    args = parse_args([*MASTER, "--token", "t"])
    assert (args.token, args.token_in_argv) == ("t", True)


def test_flags_win_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_AGENT_TOKEN_FILE", str(tmp_path / "missing"))
    monkeypatch.setenv("DET_AGENT_TOKEN", "from-env")
    assert parse_args([*MASTER, "--token", "t"]).token == "t"
    assert "DET_AGENT_TOKEN" not in os.environ


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("both", "not both"),
        ("missing", "cannot read the agent token file"),
        ("empty", "is empty"),
        ("none", "no agent token"),
    ],
)
def test_bad_token_settings_exit_2(setup: str, message: str, tmp_path: Path, capsys) -> None:
    argv = {
        "both": ["--token", "t", "--token-file", str(_token_file(tmp_path))],
        "missing": ["--token-file", str(tmp_path / "nope")],
        "empty": ["--token-file", str(_token_file(tmp_path, " \n"))],
        "none": [],
    }[setup]
    with pytest.raises(SystemExit) as exc:
        parse_args([*MASTER, *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_task_user_flag_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(_token_file(tmp_path))
    assert parse_args([*MASTER, "--token-file", path]).task_user is None  # the runtime chooses
    assert parse_args([*MASTER, "--token-file", path, "--task-user", "runner"]).task_user == "runner"
    monkeypatch.setenv("DET_AGENT_TASK_USER", "envrunner")
    assert parse_args([*MASTER, "--token-file", path]).task_user == "envrunner"


def test_agent_hands_task_user_and_hidden_paths_to_its_runtime(tmp_path: Path) -> None:
    token = str(_token_file(tmp_path))
    agent = Agent("http://127.0.0.1:1", "t", agent_id="a", slots=[Slot(0, "cpu", "cpu")],
                  work_dir=str(tmp_path / "work"), task_user="runner", hidden_paths=[token],
                  runtime_mode="process")
    runtime = agent.runtime
    assert runtime._task_user == "runner"
    assert token in runtime._hidden


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_bad_drain_timeout_exits_2(value: str, capsys) -> None:
    with pytest.raises(SystemExit):
        parse_args([*MASTER, "--token", "t", "--drain-timeout", value])
    assert "--drain-timeout" in capsys.readouterr().err
