"""A trial's metric reports: stored, then their consequences — webhooks whose thresholds they
cross, and new validations fed to the experiment's searcher."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .searcher_log import SearcherEvent

if TYPE_CHECKING:
    from ..metrics.service import MetricService, Report
    from ..webhooks.service import WebhookService
    from .searcher_batch import SearcherBatcher


class TrialReports:
    def __init__(self, metrics: MetricService, webhooks: WebhookService, searcher_batch: SearcherBatcher) -> None:
        self._metrics = metrics
        self._webhooks = webhooks
        self._batch = searcher_batch

    def report(self, trial_id: int, run_id: int | None, reports: list[Report]) -> None:
        """Store a trial's reports; feed new validation metrics to its searcher.

        The validations join the searcher batch (``searcher_batch``): with the app's loop hook
        they are fed, with those of other trials, in one transaction per experiment at the next
        loop turn; without a hook, before this returns.
        """
        validations, trial = self._metrics.ingest(trial_id, run_id, reports)
        self._webhooks.on_metrics(trial_id, reports)
        if not validations or trial.state != "ACTIVE":
            return  # a stopping trial's late validations don't move the search
        self._batch.add(trial.experiment_id, [
            SearcherEvent("validation_completed", trial.request_id, metrics=dict(report.metrics))
            for report in validations
        ])
        self._batch.kick()
