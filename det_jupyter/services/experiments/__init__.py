"""Experiments and trials: submission, the user's lifecycle verbs, the searcher loop and its
durable log, trial runs and exits, metric reports and their consequences, templates, unmanaged
(core_v2) runs and the read models the API serves.

Public modules:

- ``submission`` — ``ExperimentSubmission``: ``POST /api/v1/experiments`` in one call
  (``Submission`` in, ``Submitted`` out).
- ``preparation`` — pure: a config checked and expanded, its context packed, its searcher made
  (``PreparedExperiment``, ``prepare``).
- ``service`` — ``ExperimentService``: store, activate/pause/cancel/kill, the searcher loop.
- ``trials`` — ``TrialService``: creating trials, one allocation per run, what an exit means.
- ``reports`` — ``TrialReports``: a trial's metric reports stored, then webhooks and new
  validations for the searcher.
- ``searcher_log`` — ``SearcherEvent`` and ``SearcherLog``: the searcher's event log and snapshots.
- ``searcher_batch`` — ``SearcherBatcher``: searcher events of one loop turn in one transaction.
- ``admin`` — ``ExperimentAdmin``: archive, move, delete, one at a time or in bulk.
- ``purge`` — deleting experiments for good: their rows, then their files.
- ``templates`` — ``TemplateService``: config templates.
- ``unmanaged`` — ``UnmanagedService``: experiments and trials of processes off the cluster.
- ``views`` — ``Views``: read models of experiments, trials and tasks.
- ``trial_list`` — an experiment's trial list as 0.38.1 sorts and pages it.

Private: ``_warm_start``.

Depends on: ``common``, ``accounts``, ``access`` (admin, submission), ``workspaces`` (admin),
``allocation`` (trials run as allocations), ``checkpoints`` (purge), ``metrics`` (summaries);
``det_jupyter.searcher`` and ``det_jupyter.config``; ``webhooks`` and ``det_jupyter.rm`` for
types only. Their SQL is the store's: ``store.experiments``, ``store.trials``,
``store.unmanaged``, ``store.searcher_log``, ``store.templates``, ``store.views`` and
``store.purge``; these modules choose the transactions and keep the policy and the domain errors.
"""

__all__ = [
    "admin",
    "preparation",
    "purge",
    "reports",
    "searcher_batch",
    "searcher_log",
    "service",
    "submission",
    "templates",
    "trial_list",
    "trials",
    "unmanaged",
    "views",
]
