"""Deleting experiments for good: every row they own, then their files.

One function deletes the rows (in the caller's transaction, children before parents so the
foreign keys hold on both databases); the files — checkpoint directories and synced
TensorBoard event files under a ``shared_fs`` storage — are removed only after that
transaction commits, so a rolled-back delete never loses a checkpoint (``remove_dirs``, or
``remove_dirs_soon`` in a background thread where a request is waiting).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict
from ...store import purge as store
from ..checkpoints.gc import storage_root as gc_storage_root
from ..common.states import TERMINAL, AllocState

log = logging.getLogger("det_jupyter")

_CHUNK = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's limits
# One thread removes files after a delete, so a request's answer never waits on the disk
# (rmtree of a large checkpoint takes seconds) and removals never race each other.
_REMOVER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="det-purge")


@dataclass(frozen=True)
class Doomed:
    """A directory to remove once the rows are gone, and the root it must stay under."""

    path: str
    root: str


def chunks(ids: Sequence[Any]) -> Iterator[list[Any]]:
    for i in range(0, len(ids), _CHUNK):
        yield list(ids[i:i + _CHUNK])


def storage_root(storage: Any) -> str | None:
    """Where a checkpoint storage keeps checkpoints on this machine (the checkpoint GC's
    rule: ``host_path[/storage_path]`` for shared_fs, ``container_path`` for directory); None
    when the master cannot see it."""
    if not isinstance(storage, dict):
        return None
    root = gc_storage_root({"checkpoint_storage": storage})
    return None if root is None else str(root)


def check_deletable(conn: sa.Connection, exp_ids: Sequence[int]) -> None:
    """Conflict unless every experiment has ended, nothing of it still runs, and none of its
    checkpoints is a model version (that would leave the version without its checkpoint)."""
    terminal = [s.value for s in TERMINAL]
    for ids in chunks(exp_ids):
        live = store.not_in_states(conn, ids, terminal)
        if live:
            shown = ", ".join(f"{r.id} ({r.state})" for r in live[:5])
            more = f" and {len(live) - 5} more" if len(live) > 5 else ""
            raise Conflict(f"experiment(s) {shown}{more} have not ended; kill them (det experiment "
                           "kill ID) and wait for them to end before deleting")
        running = store.with_allocation_not_in(conn, ids, AllocState.TERMINATED.value)
        if running is not None:
            raise Conflict(f"experiment {running} still has a trial process stopping; retry in a moment")
        registered = store.registered_checkpoint(conn, ids)
        if registered is not None:
            raise Conflict(f"a checkpoint of experiment {registered.experiment_id} is a version of model "
                           f"{registered.name!r}; delete that model version first")


def purge_experiments(conn: sa.Connection, exp_ids: Sequence[int], cluster_id: str) -> list[Doomed]:
    """Delete the experiments' rows (trials, metrics, checkpoints, logs, allocations, searcher
    events, contexts, jobs); return the directories to remove after the commit.

    The caller has run ``check_deletable`` in the same transaction."""
    doomed: list[Doomed] = []
    for ids in chunks(list(exp_ids)):
        exps = store.experiments(conn, ids)
        configured = {e.id: storage_root((e.config or {}).get("checkpoint_storage")) for e in exps}
        trials = store.trials(conn, ids)
        trial_ids = [tr.id for tr in trials]
        doomed += _checkpoint_dirs(conn, ids, trial_ids, configured)
        doomed += [tensorboard_dir(root, cluster_id, exp_id) for exp_id, root in configured.items()
                   if root is not None]
        for tids in chunks(trial_ids):
            store.delete_of_trials(conn, tids)
        for tasks in chunks([tr.task_id for tr in trials]):
            store.delete_task_logs(conn, tasks)
        store.delete_experiments(conn, ids, [e.job_id for e in exps])
    return doomed


def tensorboard_dir(root: str, cluster_id: str, exp_id: int) -> Doomed:
    """Where an experiment's TensorBoard files lie in its checkpoint storage (0.38.1's layout:
    ``<storage>/<cluster id>/tensorboard/experiment/<id>``)."""
    return Doomed(os.path.join(root, cluster_id, "tensorboard", "experiment", str(exp_id)), root)


def _checkpoint_dirs(conn: sa.Connection, exp_ids: list[int], trial_ids: list[int],
                     configured: dict[int, str | None]) -> list[Doomed]:
    rows = store.checkpoints_with_storage(conn, exp_ids, trial_ids)
    out = []
    for r in rows:
        root = storage_root(r.config) if r.config else configured.get(r.experiment_id)
        if root is not None and _plain_name(r.uuid):
            out.append(Doomed(os.path.join(root, r.uuid), root))
    return out


def _plain_name(name: str) -> bool:
    """A uuid that is one path component (a task reports it; never trust it as a path)."""
    return bool(name) and name not in (".", "..") and os.path.basename(name) == name and "\\" not in name


def remove_dirs(doomed: Iterable[Doomed]) -> int:
    """Remove each directory that really lies under its root; returns how many were removed.
    A failure is logged, never raised: the rows are already gone."""
    removed = 0
    for d in doomed:
        root = os.path.realpath(d.root)
        path = os.path.realpath(d.path)
        if not path.startswith(root + os.sep) or not os.path.isdir(path):
            continue
        try:
            shutil.rmtree(path)
            removed += 1
        except OSError as exc:
            log.warning("could not remove %s of a deleted experiment: %s", path, exc)
    return removed


def remove_dirs_soon(doomed: Sequence[Doomed]) -> Future[int]:
    """``remove_dirs`` in the background (off the event loop: the rows are gone, the files
    follow); the future gives how many were removed."""
    return _REMOVER.submit(remove_dirs, list(doomed))
