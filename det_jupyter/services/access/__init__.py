"""Access: what someone may do, and where — Determined's pre-canned roles, role assignments,
each principal's grants, and which workspace holds an object.

Public modules:

- ``authz`` — pure: ``Perm``, the role table (``ROLES``), ``Grants`` and ``check_role``.
- ``rbac`` — ``RbacService``: role assignments in the database, each user's ``Grants``, and the
  workspace an object lives in.
- ``resolver`` — ``AccessService``: what handlers ask ("which workspace holds this object",
  "may this principal do this"), and the per-request ``Caller`` they check through.

Depends on: ``accounts`` (``User``, ``AllocationPrincipal``); ``interactive``
(``tensorboards.may_read``: what a TensorBoard task may read).
"""

__all__ = ["authz", "rbac", "resolver"]
