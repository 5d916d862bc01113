"""Inside a task, the client acts as the task's owner with no login (DET_USER_TOKEN for DET_USER
at DET_MASTER, as the stock client does), and only for that master and that user."""

from __future__ import annotations

from pathlib import Path

import pytest

from det_jupyter.client import Determined
from det_jupyter.client._errors import DetClientError


@pytest.fixture
def in_task(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DET_JUPYTER_IDENTITY", raising=False)
    monkeypatch.delenv("DET_PASS", raising=False)
    monkeypatch.setenv("DET_JUPYTER_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("DET_MASTER", "127.0.0.1:9")  # nothing answers there
    monkeypatch.setenv("DET_USER", "alice")
    monkeypatch.setenv("DET_USER_TOKEN", "alices-task-token")


def test_a_task_acts_as_its_owner_with_no_login(in_task: None) -> None:
    d = Determined()
    assert (d.token, d.username, d.master) == ("alices-task-token", "alice", "http://127.0.0.1:9")
    assert Determined("http://127.0.0.1:9", "alice").token == "alices-task-token"


@pytest.mark.parametrize("master, user", [("http://127.0.0.1:10", None), (None, "bob")])
def test_the_task_token_is_not_used_for_another_master_or_user(in_task: None, master: str | None,
                                                              user: str | None) -> None:
    with pytest.raises(DetClientError):  # unreachable, or not logged in: never alice's token
        d = Determined(master, user)
        assert d.token != "alices-task-token"
