"""The query of a checkpoint list (``GetExperimentCheckpoints``, ``GetTrialCheckpoints``):
declared once for both routes, read into a ``CheckpointQuery``."""

from __future__ import annotations

from ..services.checkpoints import order as ckorder
from ..services.metrics.service import MAX_METRIC_NAME
from ._api import Q, paging
from ._base import DetHandler
from ._wire import CHECKPOINT_STATES

#: ``GetExperimentCheckpoints`` / ``GetTrialCheckpoints``' query (``_checkpoint_order``).
CHECKPOINT_LIST = [
    *paging(negative_offset=True),
    Q("sortByAttr", enum=ckorder.SORT_BY, description="sort by this attribute (trial id when neither is given)"),
    Q("sortByMetric", max_length=MAX_METRIC_NAME, description="sort by this validation metric"),
    Q("states", many=True, enum=CHECKPOINT_STATES, max_items=len(CHECKPOINT_STATES)),
]


def checkpoint_query(handler: DetHandler) -> ckorder.CheckpointQuery:
    """The ``CHECKPOINT_LIST`` parameters of the request."""
    return ckorder.CheckpointQuery(
        states=frozenset(s.removeprefix("STATE_") for s in handler.get_query_arguments("states")),
        sort_attr=handler.get_query_argument("sortByAttr", None) or None,
        sort_metric=handler.get_query_argument("sortByMetric", None) or None,
        order=handler.get_query_argument("orderBy", None) or None,
        offset=handler.int_arg("offset", 0) or 0,
        limit=handler.int_arg("limit", 0) or 0,
    )
