"""The rules for names (``services/_names.py``) and the escapes that show any text safely."""

from __future__ import annotations

import re

import pytest

from det_jupyter import names as _names
from det_jupyter.errors import InvalidRequest
from det_jupyter.names import check_labels, check_name, check_text, visible
from det_jupyter.services.accounts.groups import check_group_name
from det_jupyter.services.accounts.users import check_display_name, check_username
from det_jupyter.services.experiments.templates import check_name as check_template_name
from det_jupyter.services.registry.models import check_fields, check_values, check_version_name
from det_jupyter.services.registry.models import check_name as check_model_name

GOOD = ["a", "Équipe 3", "模型", "résumé v2.1", "mnist-cnn_v2", "a.b", "...", "x" * 128,
        "<svg onload=alert(1)>", "Tom & Jerry's \"best\"", "naïve Ωmega", "a\u00a0b", "👍 model"]


@pytest.mark.parametrize("name", GOOD)
def test_ordinary_names_of_every_script_are_accepted_unchanged(name: str) -> None:
    assert check_name("workspace name", name) == name


# (value, what the message must say): each class of refusal names the problem.
BAD = [
    (None, "must be a string, got NoneType"),
    (7, "must be a string, got int"),
    (["a"], "must be a string, got list"),
    ("", "must not be empty"),
    ("   ", "must not be empty"),
    ("x" * 129, "is 129 characters long; at most 128 are allowed"),
    ("a\0b", r"U+0000 (\0), a control character"),
    ("a\tb", r"U+0009 (\t), a control character"),
    ("two\nlines", r"U+000A (\n), a control character"),
    ("\x1b[2Jwiped", r"U+001B (\x1b), a control character"),
    ("a\x7fb", r"U+007F (\x7f), a control character"),
    ("a\x85b", r"U+0085 (\x85), a control character"),
    ("gpj.\u202eexe", "U+202E RIGHT-TO-LEFT OVERRIDE, an invisible format character"),
    ("a\u202ab", "U+202A LEFT-TO-RIGHT EMBEDDING"),
    ("a\u2066b", "U+2066 LEFT-TO-RIGHT ISOLATE"),
    ("a\u2069b", "U+2069 POP DIRECTIONAL ISOLATE"),
    ("a\u200bb", "U+200B ZERO WIDTH SPACE"),
    ("a\u200db", "U+200D ZERO WIDTH JOINER"),
    ("\ufeffbom", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ("soft\u00adhyphen", "U+00AD SOFT HYPHEN"),
    ("lone\ud800", r"U+D800 (\ud800), a lone surrogate"),
    ("lone\udfff", r"U+DFFF (\udfff), a lone surrogate"),
    ("private\ue000", "U+E000 (\\ue000), a private-use character"),
    ("a\u0378b", "U+0378 (\\u0378), an unassigned code point"),
    ("a\u2028b", "U+2028 LINE SEPARATOR, a line separator"),
    ("a\u2029b", "U+2029 PARAGRAPH SEPARATOR, a paragraph separator"),
    ("a/b", "contains '/'"),
    ("../x", "contains '/'"),
    ("a\\b", "contains '\\'"),
    (".", "may not be '.'"),
    ("..", "may not be '..'"),
    (" lead", "starts or ends with whitespace"),
    ("trail ", "starts or ends with whitespace"),
    ("\u3000wide", "starts or ends with whitespace"),
]


@pytest.mark.parametrize(("value", "said"), BAD, ids=[ascii(b[0])[:24] for b in BAD])
def test_bad_names_are_refused_with_a_message_naming_the_problem(value: object, said: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        check_name("workspace name", value)
    message = err.value.message
    assert err.value.status == 400
    assert message.startswith("the workspace name ")
    assert said in message
    # The message itself is safe to print: the offending character is escaped, not echoed.
    assert not any(_names.unsafe(c) for c in message)


def test_a_refused_character_message_says_what_is_allowed() -> None:
    with pytest.raises(InvalidRequest, match="letters of any script, digits") as err:
        check_name("label", "x\u202e")
    assert "punctuation other than '/' and '\\'" in err.value.message


def test_a_long_bad_name_is_quoted_short() -> None:
    with pytest.raises(InvalidRequest) as err:
        check_name("model name", "\0" + "x" * 120, max_len=255)
    assert "'\\0" + "x" * 38 + "…'" in err.value.message


def test_the_limit_is_per_kind() -> None:
    assert check_name("label", "l" * 255, max_len=255) == "l" * 255
    with pytest.raises(InvalidRequest, match="256 characters long; at most 255"):
        check_name("label", "l" * 256, max_len=255)


def test_labels_are_names_deduplicated_and_stored_ones_pass() -> None:
    assert check_labels(["vision", "模型", "vision"]) == ["vision", "模型"]
    for bad, said in ((["ok", "a/b"], "'/'"), (["x\u202e"], "U+202E"), ([""], "must not be empty"),
                      ([3], "must be a string"), ("vision", "must be a list")):
        with pytest.raises(InvalidRequest, match=re.escape(said)):
            check_labels(bad)
    with pytest.raises(InvalidRequest, match="at most 1000"):
        check_labels([f"l{i}" for i in range(1001)])
    # A label accepted before these rules does not block adding another one.
    assert check_labels(["old/label", "new"], stored=["old/label"]) == ["old/label", "new"]
    with pytest.raises(InvalidRequest, match="'/'"):
        check_labels(["old/label", "new/one"], stored=["old/label"])


def test_free_text_allows_slashes_and_edges_but_not_invisible_characters() -> None:
    assert check_text("displayName", " Dave / Ops ", max_len=128) == " Dave / Ops "
    assert check_text("displayName", "", max_len=128) == ""
    with pytest.raises(InvalidRequest, match="must not be empty"):
        check_text("experiment name", "  ", max_len=512, empty=False)
    with pytest.raises(InvalidRequest, match="U\\+202E"):
        check_text("displayName", "evil\u202e", max_len=128)
    with pytest.raises(InvalidRequest, match="at most 3"):
        check_text("displayName", "abcd", max_len=3)


# -- every kind uses the rules --------------------------------------------------------------

@pytest.mark.parametrize("check", [check_model_name, check_template_name, check_group_name,
                                   check_username, check_version_name,
                                   lambda v: check_labels([v])[0]])
@pytest.mark.parametrize("bad", ["a\0b", "x\u202ey", "a/b", "..", "lone\ud800", " x"])
def test_every_kind_refuses_the_hostile_names(check: object, bad: str) -> None:
    with pytest.raises(InvalidRequest):
        check(bad)  # type: ignore[operator]


@pytest.mark.parametrize("check", [check_model_name, check_template_name, check_group_name,
                                   check_version_name])
def test_every_kind_accepts_names_of_every_script(check: object) -> None:
    for name in ("Équipe 3", "模型", "<svg onload=alert(1)>"):
        assert check(name) == name  # type: ignore[operator]


def test_kind_specific_rules() -> None:
    with pytest.raises(InvalidRequest, match="all digits"):
        check_model_name("1234")
    assert check_version_name("1234") == "1234" and check_version_name("") == ""
    with pytest.raises(InvalidRequest, match=r"U\+0020 SPACE; usernames have no spaces"):
        check_username("jane doe")
    with pytest.raises(InvalidRequest, match=r"U\+00A0 NO-BREAK SPACE"):
        check_username("jane\u00a0doe")
    assert check_username("jane.doe@example-1") == "jane.doe@example-1"
    assert check_username("Ésa") == "Ésa"
    with pytest.raises(InvalidRequest, match="at most 128"):
        check_username("u" * 129)
    assert check_display_name("Dave D. / Ops") == "Dave D. / Ops"
    with pytest.raises(InvalidRequest, match=r"U\+202E"):
        check_display_name("Dave\u202e")
    with pytest.raises(InvalidRequest, match="the template name"):
        check_template_name("a/b")
    with pytest.raises(InvalidRequest, match="the group name"):
        check_group_name("")


def test_model_fields_check_labels_and_names_but_keep_what_is_stored() -> None:
    assert check_fields({"labels": ["a", "a", "b"]}, ("labels",)) == {"labels": ["a", "b"]}
    with pytest.raises(InvalidRequest, match="U\\+202E"):
        check_fields({"labels": ["a\u202e"]}, ("labels",))
    with pytest.raises(InvalidRequest, match="the model version name"):
        check_values({"name": "v\0"}, version=True)
    with pytest.raises(InvalidRequest, match="the model name"):
        check_values({"name": "../m"})
    assert check_values({"description": "anything\ngoes"}) == {"description": "anything\ngoes"}


# -- showing text ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "shown"), [
    ("plain", "plain"), ("Équipe 模型 <b>&", "Équipe 模型 <b>&"), ("a\tb", "a\\tb"),
    ("a\nb\r", "a\\nb\\r"), ("\0", "\\0"), ("\x1b[31mred", "\\x1b[31mred"), ("\x7f", "\\x7f"),
    ("gpj.\u202eexe", "gpj.\\u202eexe"), ("\u2066x\u2069", "\\u2066x\\u2069"),
    ("zero\u200bwidth", "zero\\u200bwidth"), ("lone\ud800", "lone\\ud800"),
    ("tag\U000e0041", "tag\\U000e0041"), ("\u2028", "\\u2028"), ("nb\u00a0sp", "nb\u00a0sp"),
    ("\\u202e typed", "\\u202e typed"),
])
def test_visible_escapes_exactly_the_unsafe_characters(text: str, shown: str) -> None:
    assert visible(text) == shown
    assert all(not _names.unsafe(c) for c in visible(text))
