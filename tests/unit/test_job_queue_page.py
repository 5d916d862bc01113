"""The job queue page (``services.jobs.page``): a pool the cluster does not have is refused,
naming the pools, before the database or the resource manager is asked anything."""

from __future__ import annotations

import pytest

from det_jupyter.config.resources import parse_resources
from det_jupyter.errors import InvalidRequest
from det_jupyter.services.jobs.page import JobQueuePage, QueueQuery


class NoSnapshots:
    """A resource manager that must not be asked."""

    def snapshot(self) -> None:
        raise AssertionError("the snapshot was taken for a refused query")


def test_an_unknown_pool_is_refused_naming_the_pools() -> None:
    page = JobQueuePage(None, parse_resources(None), NoSnapshots())  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match=r"resourcePool: pool 'gpu' does not exist; the pools are default"):
        page.page(None, QueueQuery(resource_pool="gpu"))  # type: ignore[arg-type]
