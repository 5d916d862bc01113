"""Workspaces and projects: create, list, edit, archive, pin, move, delete.

Public modules:

- ``service`` — ``WorkspaceService``.
- ``rows`` — ``WorkspaceRecord`` / ``ProjectRecord`` and the pure rules for names, keys, notes
  and paging.

Depends on: ``common``; ``access`` (``RbacService``); ``experiments`` (``purge``, when a
workspace or project is deleted with its experiments); ``store.workspaces`` (its SQL).
"""

__all__ = ["rows", "service"]
