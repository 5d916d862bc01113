"""Checkpoints: those tasks report, a trial's latest one (what a restart resumes from), the
lists users read, and their lifecycle (garbage collection, deletion).

Public modules:

- ``service`` — ``CheckpointService``: reported checkpoints and their lists.
- ``order`` — pure: which checkpoints a list shows and in what order (0.38.1's semantics).
- ``gc`` — ``CheckpointGC``: collection when trials and experiments end, deletion by users.
- ``files`` — ``CheckpointFiles``: a checkpoint's files as a streamed archive (downloads
  through the master).
- ``archive`` — a directory as a tar or gzipped tar, chunk by chunk, never through a symlink.

Private: ``_gc_policy`` (pure: which checkpoints an experiment keeps).

Depends on: ``common``; ``allocation`` (``logs.parse_time``); ``store.checkpoints``,
``store.checkpoint_files`` (their SQL).
"""

__all__ = ["archive", "files", "gc", "order", "service"]
