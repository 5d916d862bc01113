"""The master about itself, as pure parts: Go durations, 0.38.1's log window, the in-memory
master log, and the config shown to admins (no secrets)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from det_jupyter.config.resources import parse_resources
from det_jupyter.errors import InvalidRequest
from det_jupyter.services.cluster.master_config import redact_url, shown_config
from det_jupyter.services.cluster.master_logs import MasterLogs, effective_window
from det_jupyter.services.cluster.messages import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("24h", 86400.0), ("90m", 5400.0), ("1h30m", 5400.0), ("2.5h", 9000.0), ("45s", 45.0),
    ("1500ms", 1.5), ("0s", 0.0), (" 10m ", 600.0),
])
def test_go_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5d", "2w", "h", "10", "-5m", "1h 30m", "1hm"])
def test_what_is_not_a_go_duration_is_named_with_the_forms_taken(text: str) -> None:
    with pytest.raises(InvalidRequest, match="unit of h, m, s"):
        parse_duration(text)


@pytest.mark.parametrize(("offset", "limit", "total", "window"), [
    (0, 0, 10, (0, -1)), (-5, 0, 10, (5, -1)), (-50, 0, 10, (0, -1)), (3, 4, 10, (3, 4)),
    (20, 0, 10, (10, -1)), (0, 0, 0, (0, -1)),
])
def test_the_log_window_counts_a_negative_offset_from_the_end(
        offset: int, limit: int, total: int, window: tuple[int, int]) -> None:
    assert effective_window(offset, limit, total) == window


def test_the_master_log_keeps_the_last_records_numbered_in_arrival_order() -> None:
    logs = MasterLogs(capacity=3)
    logger = logging.getLogger("det_jupyter.test_master_logs")
    logger.setLevel(logging.DEBUG)
    logs.attach("det_jupyter.test_master_logs")
    try:
        for i in range(5):
            logger.info("line %d", i)
        logger.warning("careful")
        logger.debug("not kept")  # below the handler's INFO
    finally:
        logs.detach()
    logger.info("after detach: not kept")
    entries = logs.entries()
    assert [(e.id, e.message, e.level) for e in entries] == [
        (4, "line 3", "LOG_LEVEL_INFO"), (5, "line 4", "LOG_LEVEL_INFO"), (6, "careful", "LOG_LEVEL_WARNING")]
    assert [e.message for e in logs.entries(offset=-1)] == ["careful"]
    assert [e.id for e in logs.after(4)] == [5, 6]
    assert len(logs) == 3


def test_a_record_with_a_bad_format_string_is_kept_as_written() -> None:
    logs = MasterLogs()
    logs.emit(logging.LogRecord("det_jupyter", logging.ERROR, __file__, 1, "%d apples", ("x",), None))
    assert [(e.message, e.level) for e in logs.entries()] == [("%d apples", "LOG_LEVEL_ERROR")]


@dataclass(frozen=True)
class _Settings:
    data_dir: str
    db_url: str
    agent_token: str
    initial_password: str | None
    resources: object


def test_the_shown_config_has_no_secrets_and_names_the_pools() -> None:
    settings = _Settings("/srv/det", "postgresql://det:hunter2@db.example:5432/det", "tok-123", "Pw-secret",
                         parse_resources(None))
    shown = shown_config(settings)
    text = repr(shown)
    assert "tok-123" not in text and "Pw-secret" not in text and "hunter2" not in text
    assert shown["db_url"] == "postgresql://det:***@db.example:5432/det"
    assert "data_dir" not in shown and "/srv/det" not in text
    pools = shown["resources"]["resource_pools"]
    assert [p["pool_name"] for p in pools] == ["default"] and pools[0]["scheduler"]["type"] == "priority"


def test_paths_under_the_data_dir_are_shown_relative_to_it() -> None:
    shown = shown_config(_Settings("/srv/det/", "sqlite:////srv/det/det.db", "t", None, None))
    assert shown["db_url"] == "sqlite:///$DATA_DIR/det.db" and shown["resources"] is None


def test_a_url_without_a_password_is_shown_as_is() -> None:
    assert redact_url("sqlite:////srv/det/det.db") == "sqlite:////srv/det/det.db"
    assert redact_url("postgresql://det@db/det") == "postgresql://det@db/det"


def test_keeping_the_log_does_not_silence_warnings_that_went_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """A logger with no handler printed its warnings through logging.lastResort; once the
    master log keeps its records it still prints them (tests read them in master.log)."""
    name = "det_jupyter_test_isolated_logger"
    logger = logging.getLogger(name)
    logger.propagate = False  # no handler up the hierarchy: what the det_jupyter logger is in a master
    logs = MasterLogs()
    logs.attach(name)
    try:
        logger.warning("webhook 4: its receiver answered HTTP 500")
        logger.info("kept, not printed")
    finally:
        logs.detach()
    err = capsys.readouterr().err
    assert "webhook 4: its receiver answered HTTP 500" in err and "kept, not printed" not in err
    assert [e.message for e in logs.entries()] == ["webhook 4: its receiver answered HTTP 500"]
    assert not logger.handlers
