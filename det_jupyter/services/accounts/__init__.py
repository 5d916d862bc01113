"""Accounts: who someone is — users, passwords, sessions, the user tokens of tasks, access
tokens and user groups.

Public modules:

- ``auth`` — ``AuthService`` (login, sessions, token checks, bootstrap of the first users),
  ``User``, ``AllocationPrincipal``, ``AgentUserGroup`` and the password/token hashing helpers.
- ``users`` — ``UserService``: user administration (create, rename, activate, passwords,
  agent user links).
- ``groups`` — ``GroupService``: user groups.
- ``tokens`` — ``TokenService``: long-lived access tokens.

Depends on: ``common``; ``access`` (``users`` and ``groups`` give new users and groups their
roles through ``RbacService``); ``store.accounts`` and ``store.groups`` (their SQL).
"""

__all__ = ["auth", "groups", "tokens", "users"]
