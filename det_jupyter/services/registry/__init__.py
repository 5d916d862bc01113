"""The model registry: named models in workspaces and their numbered versions, each a
checkpoint.

Public modules:

- ``models`` — ``ModelService``, ``ModelRecord``, ``VersionRecord`` (the store's records),
  the name checks.

Depends on: ``common``; ``store.registry`` (its SQL and records).
"""

__all__ = ["models"]
