"""Reports from the wire: what ingestion accepts and the 400s that name what is wrong."""

from __future__ import annotations

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.metrics.service import MAX_STEPS, parse_report


def test_a_wire_report_parses() -> None:
    r = parse_report({"group": "validation", "stepsCompleted": "12", "metrics": {"avgMetrics": {"loss": 0.5}}}, 3.0)
    assert (r.group, r.steps_completed, r.metrics, r.report_time) == ("validation", 12, {"loss": 0.5}, 3.0)
    assert parse_report({"steps_completed": 0, "metrics": {}}, 1.0).group == "training"


@pytest.mark.parametrize(("body", "words"), [
    ({"stepsCompleted": "x", "metrics": {}}, "must be an integer"),
    ({"stepsCompleted": None, "metrics": {}}, "must be an integer"),
    ({"stepsCompleted": -1, "metrics": {}}, "between 0 and"),
    ({"stepsCompleted": MAX_STEPS + 1, "metrics": {}}, "between 0 and"),
    ({"stepsCompleted": 1, "metrics": [1]}, "metrics must be an object"),
    ({"stepsCompleted": 1, "metrics": {}, "group": "g" * 65}, "at most 64"),
    ([1], "must be an object"),
])
def test_bad_reports_name_the_problem(body, words: str) -> None:
    with pytest.raises(InvalidRequest, match=words):
        parse_report(body, 1.0)
