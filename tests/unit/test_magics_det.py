"""%det's routing and its errors, without a kernel or a master (nothing listens there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError

from det_jupyter.client import TokenStore
from det_jupyter.magics._magics import run_det, submit_cell
from tests._master import free_port


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """DET_MASTER where nothing listens, with a cached token for it."""
    url = f"http://127.0.0.1:{free_port()}"
    for var in ("DET_USER", "DET_PASS", "DET_JUPYTER_IDENTITY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DET_MASTER", url)
    monkeypatch.setenv("DET_JUPYTER_CONFIG_DIR", str(tmp_path / "cfg"))
    TokenStore(tmp_path / "cfg" / "auth.json").save(url, "admin", "tok")
    return url


@pytest.mark.parametrize("line", ["e list", "e describe 3", "job list", "agent list",
                                  "t describe 1", "master info", "e pause 3",
                                  "e create nope.yaml ."])
def test_an_unreachable_master_is_one_line(nowhere: str, line: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert run_det(line) is None
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and len(err.strip().splitlines()) == 1, err
    assert ("cannot reach the master" in err) or ("cannot read the config file" in err), err


@pytest.mark.parametrize(("line", "message"), [
    ("", "the following arguments are required: COMMAND"),
    ("e lst", "invalid choice: 'lst'"),
    ("e describe x", "invalid int value: 'x'"),
    ("e list '", "%det: No closing quotation"),
])
def test_bad_arguments_are_usage_errors(line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run_det(line)


def test_help_prints_and_returns_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_det("-h") is None
    assert capsys.readouterr().out.startswith("usage: %det")


def test_cell_help_and_errors(nowhere: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert submit_cell("--help", "print(1)", {}) is None
    assert "--config-file" in capsys.readouterr().out
    with pytest.raises(UsageError, match="--config cfg: no such variable"):
        submit_cell("--config cfg", "print(1)", {})
    with pytest.raises(UsageError, match="--config cfg must be a dict or YAML text"):
        submit_cell("--config cfg", "print(1)", {"cfg": [1, 2]})
    with pytest.raises(UsageError, match="cannot read --config-file"):
        submit_cell(f"--config-file {tmp_path / 'none.yaml'}", "print(1)", {})
    with pytest.raises(UsageError, match="is not a directory"):
        submit_cell(f"--context {tmp_path / 'none'}", "print(1)", {})
    assert submit_cell("--name x", "print(1)", {}) is None  # the master is unreachable
    err = capsys.readouterr().err
    assert err.startswith("Error: cannot reach the master") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("line", "data"), [
    ("dashboard", {"kind": "experiments"}),
    ("dashboard experiments", {"kind": "experiments"}),
    ("dashboard experiment 3", {"kind": "experiment", "id": 3}),
    ("dashboard trial 12", {"kind": "trial", "id": 12}),
    ("dashboard registry", {"kind": "registry"}),
])
def test_dashboard_returns_a_link_to_the_panel(line: str, data: dict[str, object]) -> None:
    bundle = run_det(line)._repr_mimebundle_()
    assert bundle["application/vnd.det-jupyter.dashboard+json"] == data
    assert bundle["text/plain"].startswith("det dashboard: ")


@pytest.mark.parametrize("line", ["dashboard experiment", "dashboard trial x", "dashboard trial 0",
                                  "dashboard registry 3", "dashboard models"])
def test_dashboard_bad_arguments_are_usage_errors(line: str) -> None:
    with pytest.raises(UsageError, match=r"usage: %det dashboard \[experiments"):
        run_det(line)
