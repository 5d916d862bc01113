"""The det CLI's table formatter: pure values in, aligned text out."""

from __future__ import annotations

import argparse

import pytest

from det_jupyter.cli.det._progress import StatusLine, bar
from det_jupyter.cli.det._table import cell, format_pairs, format_table


def test_columns_align_numbers_right_and_text_left() -> None:
    out = format_table(["ID", "Name", "Loss"], [[1, "counter", 0.5], [12, "mlp", None]])
    assert out.splitlines() == [
        "ID | Name    | Loss",
        "---+---------+-----",
        " 1 | counter |  0.5",
        "12 | mlp     |",
    ]


def test_headers_only_and_short_rows_are_padded() -> None:
    assert format_table(["A", "Bee"], []) == "A | Bee\n--+----"
    assert format_table(["A", "B", "C"], [["x"]]).splitlines()[2] == "x |   |"


def test_a_row_longer_than_the_headers_is_an_error() -> None:
    with pytest.raises(ValueError, match="row 0 has 3 values for 2 columns"):
        format_table(["A", "B"], [[1, 2, 3]])


@pytest.mark.parametrize(("value", "shown"), [
    (None, ""), (True, "yes"), (False, "no"), (3, "3"), (1 / 3, "0.333333"), (1e-9, "1e-09"),
    (["a", 1], "a, 1"), ("two\nlines", "two lines"), ({"k": 1}, "{'k': 1}"),
])
def test_cells(value: object, shown: str) -> None:
    assert cell(value) == shown


@pytest.mark.parametrize(("value", "shown"), [
    ("gpj.\u202eexe", "gpj.\\u202eexe"), ("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred"),
    ("nul\0", "nul\\0"), ("tab\tbed", "tab\\tbed"), ("zero\u200bwidth", "zero\\u200bwidth"),
    ("lone\ud800", "lone\\ud800"), ("line\u2028sep", "line sep"), ("Équipe 模型 <b>", "Équipe 模型 <b>"),
    (["ok", "bad\u2066"], "ok, bad\\u2066"),
])
def test_cells_escape_what_would_hijack_a_terminal(value: object, shown: str) -> None:
    assert cell(value) == shown


def test_a_hostile_name_cannot_move_the_cursor_or_reorder_a_table() -> None:
    out = format_table(["ID", "Name", "lo\u202ess"], [[1, "\x1b[1A\rowned\u202e", 0.5]])
    assert out.splitlines() == [
        "ID | Name                | lo\\u202ess",
        "---+---------------------+-----------",
        " 1 | \\x1b[1A owned\\u202e |        0.5",
    ]
    assert all(c.isprintable() for c in out.replace("\n", ""))
    assert format_pairs([("name", "x\u202e")]) == "name: x\\u202e"


def test_no_line_ends_in_spaces() -> None:
    out = format_table(["Name", "Note"], [["a", ""], ["long name", None]])
    assert all(line == line.rstrip() for line in out.splitlines())


def test_pairs_align_values() -> None:
    assert format_pairs([("version", "0.38.1"), ("clusterName", "x"), ("empty", None)]) == (
        "version:     0.38.1\nclusterName: x\nempty:"
    )
    assert format_pairs([]) == ""


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass


def test_status_line_rewrites_in_place_on_a_tty_and_prints_changes_elsewhere() -> None:
    tty = _Stream(True)
    status = StatusLine(tty)  # type: ignore[arg-type]
    status.update("running 10%")
    status.update("ok")
    status.done()
    assert tty.text == "\rrunning 10%\rok         \n"
    plain = _Stream(False)
    status = StatusLine(plain)  # type: ignore[arg-type]
    for text in ("a", "a", "b"):
        status.update(text)
    status.done()
    assert plain.text == "a\nb\n"
    assert bar(0.5, 4) == "[##--]" and bar(None, 2) == "[--]" and bar(7, 2) == "[##]"


class _HostileMaster:
    """A master whose stored names predate the name rules: a bidi override and a terminal
    escape in a username and a group name (reads never fail, so the CLI must show them)."""

    NAME = "gpj.\u202eexe\x1b[2J"

    def whoami(self) -> dict[str, object]:
        return {"username": self.NAME}


def test_messages_outside_tables_escape_names_from_the_master(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from det_jupyter.cli.det import _users, cluster

    monkeypatch.setattr(cluster, "connect", lambda args: _HostileMaster())
    monkeypatch.setattr(_users, "connect", lambda args: _HostileMaster())
    monkeypatch.setattr(_users.acc, "update_group", lambda d, old, new_name: {
        "groupId": 7, "name": _HostileMaster.NAME})
    cluster.whoami(argparse.Namespace())
    _users.group_rename(argparse.Namespace(old_group_name="old", new_group_name="new"))
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "You are logged in as user 'gpj.\\u202eexe\\x1b[2J'",
        "user group with ID 7 name changed from old to gpj.\\u202eexe\\x1b[2J",
    ]
