"""Historical resource allocation as CSV: ``/resources/allocation/raw``,
``/resources/allocation/allocations-csv`` and ``/resources/allocation/aggregated`` (outside
``/api/v1``, as in 0.38.1; ``det resources raw|allocations|aggregated``). Admins only."""

from __future__ import annotations

from ..services.access.authz import Perm
from ._api import Q, api
from ._base import DetHandler

#: 0.38.1 takes exactly this form (Go's ``2006-01-02T15:04:05Z``); whether it is a real time,
#: and the window's order, the service checks.
_STAMP = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
_WINDOW = [Q("timestamp_after", "string", required=True, max_length=20, pattern=_STAMP),
           Q("timestamp_before", "string", required=True, max_length=20, pattern=_STAMP)]
_DAY = "^[0-9]{4}-[0-9]{2}(-[0-9]{2})?$"
_PERIODS = ("RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY", "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY")


class _CsvHandler(DetHandler):
    permissions = {"GET": Perm.VIEW_MASTER_CONFIG}

    def _csv(self, text: str) -> None:
        self.set_header("Content-Type", "text/csv")
        self.finish(text)

    def _arg(self, name: str) -> str:
        return self.get_query_argument(name, "") or ""


class RawAllocationHandler(_CsvHandler):
    @api(query=_WINDOW)
    def get(self) -> None:
        usage = self.master.resource_usage
        self._csv(usage.raw_csv(self._arg("timestamp_after"), self._arg("timestamp_before")))


class AllocationsCsvHandler(_CsvHandler):
    @api(query=_WINDOW)
    def get(self) -> None:
        usage = self.master.resource_usage
        self._csv(
            usage.allocations_csv(self._arg("timestamp_after"), self._arg("timestamp_before"))
        )


class AggregatedAllocationHandler(_CsvHandler):
    @api(query=[Q("start_date", "string", required=True, max_length=10, pattern=_DAY),
                Q("end_date", "string", required=True, max_length=10, pattern=_DAY),
                Q("period", "string", required=True, enum=_PERIODS)])
    def get(self) -> None:
        usage = self.master.resource_usage
        self._csv(
            usage.aggregated_csv(
                self._arg("start_date"), self._arg("end_date"), self._arg("period")
            )
        )
