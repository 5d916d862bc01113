"""Metrics: the policy over the metric store (``store.metrics``, which holds ingestion's SQL,
the stored series and the charts' SQL) — what a report may hold, which reports of a batch
are new, which run may report, what a trial's best validation is.

Public modules:

- ``service`` — ``MetricService`` (``ingest``, ``history``, ``count``, ``series``),
  ``Report``, ``parse_report(s)``, the request limits (``MAX_*``), ``recompute_summary``.
- ``timeseries`` — the time-series query of several trials (``GET /api/v1/trials/time-series``).

Depends on: ``common``; ``store.metrics``; ``access`` for types only (``Caller``).
"""

__all__ = ["service", "timeseries"]
