"""Jobs: the job queue — reading it in queue order, the queue page users see, and editing a
job's priority, weight, max slots, resource pool and place in line.

Public modules:

- ``queue`` — the read-only queue (``Job``, ``queue``).
- ``page`` — ``JobQueuePage``: a page of the queue for one caller (``QueueQuery``), and a
  queued job's wait reason against the resource manager's snapshot.
- ``control`` — ``JobControl``: queue edits (``QueueUpdate``).

Depends on: ``common``, ``accounts`` (``User``), ``experiments`` (``views.progress_of``);
``det_jupyter.scheduler``; ``access``, ``det_jupyter.rm`` and ``det_jupyter.config`` for types
only.
"""

__all__ = ["control", "page", "queue"]
