"""The checks every JSON request body passes (server_ext._json) and the query-parameter
declarations (server_ext._api): pure functions, no server."""

from __future__ import annotations

import json

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.server_ext._api import Api, Q, ident, obj, string
from det_jupyter.server_ext._json import MAX_DEPTH, checked_json


def test_ordinary_bodies_pass_unchanged() -> None:
    body = {"name": "Équipe 3 模型", "n": 2**63 - 1, "m": -(2**63), "x": [1.5, None, True, {"a": "b"}]}
    assert checked_json(json.dumps(body).encode()) == body


@pytest.mark.parametrize(("raw", "words"), [
    (b"[" * 100_000 + b"]" * 100_000, f"at most {MAX_DEPTH}"),       # the C parser's own limit
    (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), f"at most {MAX_DEPTH}"),
    (b'{"a": ' + b"9" * 400 + b"}", "body.a is out of range"),
    (b'{"a": [1, ' + str(2**63).encode() + b"]}", "body.a[1] is out of range"),
    (b'{"a": "x\\ud83d"}', "lone surrogate (U+D83D)"),
    (b'{"a\\u0000": 1}', "NUL"),
    (b"{", "not valid JSON"),
    (b"\xff\xfe\xfa", "not valid JSON"),
])
def test_bodies_the_store_cannot_hold_are_refused_naming_where(raw: bytes, words: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        checked_json(raw)
    assert words in err.value.message


def test_scrub_replaces_bad_characters_of_task_output() -> None:
    assert checked_json(b'{"log": "a\\u0000b\\udc80"}', scrub=True) == {"log": "a\ufffdb\ufffd"}


@pytest.mark.parametrize(("raw", "words"), [
    ("¹", "ASCII digits"), ("٣", "ASCII digits"), ("1" + "0" * 29, "ASCII digits"), ("1e3", "ASCII digits"),
    ("-1", "between 0 and"), (str(2**62 + 1), "between 0 and"),
])
def test_integer_query_parameters_take_ascii_digits_in_range(raw: str, words: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        Q("limit", "integer", minimum=0).parse(raw)
    assert "limit" in err.value.message and words in err.value.message


def test_query_declarations_check_types_enums_and_repeats() -> None:
    spec = Api(query=(Q("limit", "integer"), Q("archived", "boolean"), Q("orderBy", enum=("ASC", "DESC"))))
    spec.check_query({"limit": [b"5"], "archived": [b"true"], "orderBy": [b"ASC"], "unknown": [b"x"]})
    for args, words in [({"archived": [b"maybe"]}, "true or false"), ({"orderBy": [b"UP"]}, "one of ASC, DESC"),
                        ({"limit": [b"1", b"2"]}, "given once"), ({"limit": [b"\xff"]}, "UTF-8")]:
        with pytest.raises(InvalidRequest) as err:
            spec.check_query(args)
        assert words in err.value.message


def test_body_declarations_name_the_field() -> None:
    spec = Api(body=obj(("name",), name=string(8), workspaceId=ident()))
    spec.check_body({"name": "ok", "workspaceId": 3, "extra": "allowed"})
    for body, words in [({"workspaceId": 3}, "'name' is a required property"),
                        ({"name": "ok", "workspaceId": "3"}, "body.workspaceId"),
                        ({"name": "x" * 9}, "body.name")]:
        with pytest.raises(InvalidRequest) as err:
            spec.check_body(body)
        assert words in err.value.message
