"""Common: what every service domain shares. Depends on no other domain (only
``det_jupyter.errors``; the name rules it used to hold are ``det_jupyter.names``, shared with
the client side); every other domain may depend on it.

Public modules:

- ``clock`` — ``Clock`` (the only clock services read) and ``FakeClock`` for tests.
- ``states`` — ``State`` and ``AllocState`` with their allowed transitions (``can_transition``)
  and the named sets (``TERMINAL``, ``STOPPING``, ``LIVE_ALLOC``, …).
- ``sealed`` — secrets at rest: ``Sealer`` (the master's 0600/0700 files are
  ``det_jupyter.private_files``, shared with the CLI).
- ``identity`` — ``MasterIdentity``: the master's URL and ids as tasks are told them.
- ``late`` — ``Late``: a dependency the composition root binds after construction, where two
  services need each other.
- ``signal`` — ``Signal``: a named event whose listeners the composition root connects.
"""

__all__ = ["clock", "identity", "late", "sealed", "signal", "states"]
