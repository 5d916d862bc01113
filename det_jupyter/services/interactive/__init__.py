"""Interactive tasks: notebooks, TensorBoards, commands and shells — launching them as jobs of
their own, reaching them through the master's proxy, and culling them when idle.

Public modules:

- ``commands`` — ``CommandService`` (every interactive task's lifecycle) and ``OwnerRouter``
  (routes an allocation's specs and exit to trials or commands).
- ``notebooks`` — ``NotebookService``: proxied tasks' readiness, proxy tickets and routes.
- ``culler`` — ``IdleCuller``: kills a proxied task idle for its ``idle_timeout``.
- ``tensorboards`` — what the master checks of TensorBoard tasks.
- ``generic`` — generic tasks (``det task create``): their config and states (pure), and
  ``GenericTasks`` (create, pause, unpause, kill) on ``CommandService``.
- ``kinds`` — pure: the kinds of interactive task and what differs between them.
- ``ssh`` — pure: shells' key pairs, settings and command.
- ``origins`` — ``ProxyOrigin``: the proxy's own origin.

Private: ``_common`` (notebook settings, tickets, activity), ``_tensorboard``, ``_probe``.

Depends on: ``common``, ``accounts``, ``access`` (``RbacService``), ``allocation`` (allocations,
specs); ``det_jupyter.config``; ``experiments`` for types only.
"""

__all__ = ["commands", "culler", "generic", "kinds", "notebooks", "origins", "ssh", "tensorboards"]
