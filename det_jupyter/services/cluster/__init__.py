"""Cluster: what the master says about itself — the cluster-wide message users see, the
master's own log, and its configuration without secrets.

Public modules:

- ``messages`` — ``ClusterMessages`` (``current``, ``active``, ``set``, ``clear``),
  ``ClusterMessage``, ``parse_duration``.
- ``master_logs`` — ``MasterLogs``: a logging handler keeping the last records in memory,
  ``MasterLogEntry``, ``effective_window``.
- ``master_config`` — ``shown_config``: the master's settings as shown to admins.
- ``pool_bindings`` — ``PoolBindings`` (pools bound to workspaces) and ``Admission``: what
  submissions call to apply config policies and pool bindings.
- ``resource_usage`` — ``ResourceUsage``: slot usage reports (raw, per allocation, aggregated).
- ``config_policies`` — ``ConfigPolicies``: task config policies, global and per workspace.

Depends on: ``common``; ``config.resources``; ``store.cluster_messages``, ``store.pool_bindings``,
``store.config_policies``.
"""

__all__ = ["config_policies", "master_config", "master_logs", "messages", "pool_bindings", "resource_usage"]
