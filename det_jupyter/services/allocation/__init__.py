"""Allocations: one run of a task on a gang of slots — its request to the scheduler, its tokens,
its containers and ports, its task spec, its logs, preemption and exit.

Public modules:

- ``service`` — ``AllocationService`` (the ``AllocationPort`` of ``det_jupyter.rm.base`` that a
  resource manager calls) and ``AllocationOwner`` (trials or commands: the specs of their runs,
  and what their exits mean).
- ``gang`` — ``Gang``: where an allocation runs (its ``rm.base.Container``s) and the ports its
  gang uses.
- ``spec`` — pure builders of a task's ``det_agent.wire.TaskSpec`` and its parts
  (``build_trial_spec``, ``master_env``, ``task_env``, ``gang_env``, ``with_run_as``).
- ``cluster_info`` — the ``/run/determined/info/*.json`` files the stock harness reads.
- ``all_gather`` — ``AllGathers``: the containers' all-gather rounds (in memory), which the
  stock ``prep_container --rendezvous`` of a Kubernetes gang meets through.
- ``logs`` — ``LogService``: task logs stored in order, filtered, followed (the resource
  manager's ``TaskLogPort``).

Private: ``_rows`` (a row as the scheduler's ``Request``/``Running``). The statements are the
store's: ``det_jupyter.store.allocations``, ``store.logs``, ``store.tasks``, ``store.jobs``.

Depends on: ``common``, ``accounts`` (tokens, ``AgentUserGroup``); ``det_jupyter.rm.base``
(``ResourceManager``, ``Container``), ``det_jupyter.scheduler``, ``det_jupyter.config``.
"""

__all__ = ["all_gather", "cluster_info", "gang", "logs", "service", "spec"]
