"""Cluster: what the master says about itself — the cluster-wide message users see, the
master's own log, and its configuration without secrets.

Public modules:

- ``messages`` — ``ClusterMessages`` (``current``, ``active``, ``set``, ``clear``),
  ``ClusterMessage``, ``parse_duration``.
- ``master_logs`` — ``MasterLogs``: a logging handler keeping the last records in memory,
  ``MasterLogEntry``, ``effective_window``.
- ``master_config`` — ``shown_config``: the master's settings as shown to admins.

Depends on: ``common``; ``store.cluster_messages``.
"""

__all__ = ["master_config", "master_logs", "messages"]
