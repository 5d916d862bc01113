"""Ingestion's columns fast path (``store.metrics._columns``): a batch where every report holds the
same finite numbers is folded into the summary and cut into stored-series members by
columns, with the same result as value by value; any other batch is refused (and takes the
per-value path)."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from det_jupyter.store.metrics import Report, update_summary
from det_jupyter.store.metrics import _columns as columns
from det_jupyter.store.metrics import _series as stored
from det_jupyter.store.metrics._encode import body as _body
from det_jupyter.store.metrics._summary import fold_each as _fold_each

NAMES = ["loss", "acc", "a,b", 'q"x', "lr", "5%", "%s", "é"]
finite = st.one_of(st.floats(-1e300, 1e300), st.integers(-(2**60), 2**60))  # a dozen sum to a float
odd = st.one_of(st.just(float("nan")), st.just(float("inf")), st.booleans(), st.none(), st.text(max_size=3),
                st.lists(st.integers(), max_size=2), st.integers(min_value=2**1100, max_value=2**1100 + 5))


@st.composite
def batches(draw: st.DrawFn, *, uniform: bool) -> list[Report]:
    """Reports of one group in step order: the same names each time and finite numbers
    (``uniform``), or with now and then a name missing, a name more, an odd value."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    steps = sorted(draw(st.lists(st.integers(0, 10_000), min_size=1, max_size=12)))
    out = []
    for step in steps:
        metrics = {name: draw(finite) for name in names}
        if not uniform and draw(st.booleans()):
            choice = draw(st.integers(0, 2))
            if choice == 0:
                metrics.pop(names[0])
            elif choice == 1:
                metrics["extra"] = draw(finite)
            else:
                metrics[names[-1]] = draw(odd)
        out.append(Report("training", step, metrics, 1.0))
    return out


prior = st.one_of(st.none(), st.fixed_dictionaries({"training": st.fixed_dictionaries({
    "loss": st.fixed_dictionaries({"last": st.just(0.5), "min": st.just(-3.0), "max": st.just(9.0),
                                   "count": st.integers(1, 5), "lastStep": st.integers(0, 20_000)})})}))


@settings(max_examples=300, deadline=None)
@given(batches(uniform=True), prior)
def test_a_uniform_batch_folds_into_the_summary_as_value_by_value(reports: list[Report], summary: dict | None) -> None:
    assert columns.uniform(reports) is not None
    expected = dict(summary or {})
    _fold_each(expected, reports)
    assert update_summary(summary, reports) == expected


@settings(max_examples=300, deadline=None)
@given(batches(uniform=False), prior)
def test_any_batch_folds_as_value_by_value(reports: list[Report], summary: dict | None) -> None:
    expected = dict(summary or {})
    try:
        _fold_each(expected, reports)
    except OverflowError:  # an int past the floats: refused the same way on either path
        return
    assert update_summary(summary, reports) == expected


@settings(max_examples=300, deadline=None)
@given(batches(uniform=False), st.data())
def test_members_by_columns_are_those_by_value(reports: list[Report], data: st.DataObject) -> None:
    bodies = [_body(r.metrics) for r in reports]
    pieces = [b[1:-1].split(",") for b in bodies]
    sampled = sorted(data.draw(st.sets(st.integers(0, len(reports) - 1))))
    fast = stored._members_by_columns(reports, pieces, sampled)
    slow = stored._members_by_value(reports, pieces, sampled)
    if fast is None:
        assert columns.uniform(reports) is None or any(',' in n for n in reports[0].metrics)
        return
    assert sorted(fast) == sorted(slow)
    for name, n, text, chosen in fast:  # the members are the values, each point's closing
        values = [json.loads("{" + line[:-2] + "}")[name] for line in text.splitlines()]
        assert n == len(values) == len(reports) and values == [r.metrics[name] for r in reports]
        assert chosen.count("\n") == len(sampled)


def test_what_is_not_uniform_is_refused() -> None:
    def of(*metrics: dict) -> list[Report]:
        return [Report("training", s, m, 1.0) for s, m in enumerate(metrics)]

    assert columns.uniform(of({"a": 1.0, "b": 2}, {"a": 3, "b": 4.5})) == (("a", "b"), [(1.0, 3), (2, 4.5)])
    assert columns.uniform([]) is None and columns.uniform(of({})) is None
    assert columns.uniform(of({"a": 1.0, "b": 2.0}, {"b": 2.0, "a": 1.0})) is None  # another order
    assert columns.uniform(of({"a": 1.0}, {"a": 1.0, "b": 2.0})) is None
    for bad in (math.nan, math.inf, -math.inf, True, None, "1", [1], 2**1100):
        assert columns.uniform(of({"a": 1.0}, {"a": bad})) is None, bad
    assert columns.uniform(of({"a": 1.7e308}, {"a": 1.7e308})) is None  # finite, but not their sum: per value


@settings(max_examples=300, deadline=None)
@given(batches(uniform=True))
def test_bodies_by_one_template_are_the_encoders(reports: list[Report]) -> None:
    found = columns.uniform(reports)
    assert found is not None
    assert columns.encoded(*found) == [_body(r.metrics) for r in reports]


def test_a_name_with_a_percent_sign_or_an_escape_is_spelt_as_json_spells_it() -> None:
    reports = [Report("training", 1, {"100%": 1.5, "%r": 2, "é\n\"": -0.0, "big": 2**70}, 1.0)]
    found = columns.uniform(reports)
    assert found is not None
    assert columns.encoded(*found) == [_body(reports[0].metrics)]
    assert json.loads(columns.encoded(*found)[0]) == reports[0].metrics
