"""Checkpoint lifecycle: garbage collection when trials and experiments end, and deletion by
users (``DELETE /api/v1/checkpoints``, ``POST /api/v1/checkpoints/rm``).

Deleting a checkpoint marks it DELETED in the database, then removes its directory from the
storage (``shared_fs``: ``host_path[/storage_path]/<uuid>``; ``directory``:
``container_path/<uuid>``) where the master can see it. Garbage collection and file removal run
on one worker thread, never on the event loop. Which checkpoints a policy deletes is decided by
the pure ``select_to_delete`` (``_gc_policy``); the write re-checks, in its own transaction,
that none is used by a model version or is a live trial's latest checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import checkpoints as store
from ...store import reader
from ..common.states import TERMINAL
from ._gc_policy import COLLECTABLE, CheckpointFacts, GcPolicy, TrialFacts, select_to_delete

__all__ = ["COLLECTABLE", "CheckpointFacts", "CheckpointGC", "GcPolicy", "TrialFacts",
           "checkpoint_dir", "select_to_delete", "storage_root"]

log = logging.getLogger("det_jupyter.checkpoint_gc")

_UUID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,63}")
_TERMINAL = [s.value for s in TERMINAL]
COALESCE_S = 0.5  # how long the worker waits for more work before a round of collections


def storage_root(config: dict[str, Any]) -> Path | None:
    """Where an experiment's checkpoints are stored, or None when the master cannot see it."""
    storage = config.get("checkpoint_storage") or {}
    kind = storage.get("type", "shared_fs")
    base = {"shared_fs": storage.get("host_path"), "directory": storage.get("container_path")}.get(kind)
    if not isinstance(base, str) or not base:
        return None
    root = Path(base).expanduser()
    if storage.get("storage_path"):
        root = root / str(storage["storage_path"])
    return root


def checkpoint_dir(root: Path, uuid: str) -> Path | None:
    """``root/<uuid>``, or None for a uuid that is not a plain name (never a path outside root)."""
    return root / uuid if _UUID.fullmatch(uuid) else None


def _metric(body: str, name: str | None) -> float | None:
    try:
        value = json.loads(body).get(name) if name else None
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class CheckpointGC:
    """Collects experiments' checkpoints on a worker thread; deletes checkpoints for users."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._cond = threading.Condition()
        self._experiments: list[int] = []
        self._dirs: list[Path] = []
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- the worker -------------------------------------------------------------------------

    def schedule(self, experiment_id: int) -> None:
        """Collect the experiment's checkpoints soon (it or one of its trials ended)."""
        self._enqueue(lambda: self._experiments.append(experiment_id))

    def _enqueue(self, add: Any) -> None:
        with self._cond:
            if self._stopping:
                return
            add()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="checkpoint-gc", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until nothing is queued or running; whether that happened in time."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not (self._busy or self._experiments or self._dirs), timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Finish queued file removals (no new collections), then end the worker."""
        with self._cond:
            self._stopping = True
            self._experiments.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._experiments or self._dirs)
                if self._stopping and not self._dirs:
                    return
                # A moment for more to come: trials that end together (an ASHA rung, a
                # search of short trials) then share one collection of their experiment.
                self._cond.wait_for(lambda: self._stopping, timeout=COALESCE_S)
                exps, self._experiments = self._experiments, []
                dirs, self._dirs = self._dirs, []
                self._busy = True
            try:
                for exp_id in dict.fromkeys(exps):  # each once, however many of its trials ended
                    try:
                        self.collect(exp_id)
                    except Exception:
                        log.exception("checkpoint GC of experiment %s failed", exp_id)
                for path in dirs:
                    _remove_dir(path)
            except Exception:
                log.exception("checkpoint GC failed")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    # -- garbage collection ---------------------------------------------------------------

    def collect(self, experiment_id: int) -> list[str]:
        """Apply the experiment's policy now (on the calling thread); the uuids deleted."""
        with self._reader.connect() as conn:
            # Its collectable checkpoints first (indexed by experiment): where there are none
            # (yet), the trial end costs this one read, not a read of all the experiment's trials.
            rows = store.collectable(conn, experiment_id, COLLECTABLE)
            if not rows:
                return []
            config = store.experiment_config(conn, experiment_id)
            if config is None:
                return []
            # Only what the policy looks at: the trials that have such checkpoints, and the
            # validations at those checkpoints' steps. Not every trial and validation of the
            # experiment, read again at each trial end (thousands of rows for a large search).
            trials = [TrialFacts(r.id, r.state not in _TERMINAL, r.latest_checkpoint)
                      for r in store.trials_of_collectable(conn, experiment_id, COLLECTABLE)]
            metric_name = (config.get("searcher") or {}).get("metric")
            # (trial, step) -> the searcher metric and the validation's id (ties go by it)
            metrics: dict[tuple[int, int], tuple[float, int]] = {}
            for v in store.validations_of_collectable(conn, experiment_id, COLLECTABLE):
                value = _metric(v.body, metric_name)
                if value is not None:
                    metrics[(v.trial_id, v.steps_completed)] = (value, v.id)
            protected = self._registered(conn, [r.uuid for r in rows])
        facts = []
        for r in rows:
            value, order = metrics.get((r.trial_id, r.steps_completed), (None, 0))
            facts.append(CheckpointFacts(r.uuid, r.trial_id, r.steps_completed, value, r.state, order))
        doomed = select_to_delete(facts, trials, GcPolicy.from_config(config), protected)
        if not doomed:
            return []
        deleted = self._mark_deleted(sorted(doomed), strict=False)
        root = storage_root(config)
        for uuid in deleted:
            path = checkpoint_dir(root, uuid) if root is not None else None
            if path is not None:
                _remove_dir(path)
        log.info("checkpoint GC of experiment %s deleted %d checkpoint(s)", experiment_id, len(deleted))
        return deleted

    def _registered(self, conn: sa.Connection, uuids: list[str]) -> set[str]:
        return store.registered(conn, uuids)

    def _live_latest(self, conn: sa.Connection, uuids: list[str]) -> dict[str, int]:
        """Those of ``uuids`` that are a live trial's latest checkpoint: {uuid: trial}."""
        return store.latest_of_trials_in(conn, uuids, _TERMINAL)

    def _mark_deleted(self, uuids: list[str], *, strict: bool,
                      states: tuple[str, ...] = COLLECTABLE) -> list[str]:
        """Mark the checkpoints DELETED in one transaction that first locks their rows and then
        re-checks what protects them (a version registered meanwhile waits on the lock, then
        finds the checkpoint DELETED). ``strict``: a protected one refuses the whole request."""
        with self._engine.begin() as conn:
            locked = store.lock_in_states(conn, uuids, states)
            registered = self._registered(conn, locked)
            live = self._live_latest(conn, locked)
            if strict and (registered or live):
                raise Conflict(_protected_message(conn, registered, live))
            doomed = [u for u in locked if u not in registered and u not in live]
            store.mark_deleted(conn, doomed)
        return doomed

    # -- deletion by users ----------------------------------------------------------------

    def delete(self, uuids: list[str]) -> list[str]:
        """``DELETE /api/v1/checkpoints``: mark them DELETED now and remove their files on the
        worker. All or nothing: 409 if any is used by a model version or is a live trial's
        latest checkpoint. Already-deleted ones are accepted and left alone."""
        uuids = list(dict.fromkeys(uuids))
        roots = self._roots(uuids)
        deleted = self._mark_deleted(uuids, strict=True)
        paths = [p for u in deleted if (r := roots.get(u)) is not None and (p := checkpoint_dir(r, u))]
        if paths:
            self._enqueue(lambda: self._dirs.extend(paths))
        return deleted

    def remove_files(self, uuids: list[str], globs: list[str]) -> None:
        """``POST /api/v1/checkpoints/rm`` (blocking: call it off the event loop): delete the
        files matching ``globs`` in each checkpoint's directory, then record what is left as
        its resources: PARTIALLY_DELETED, or DELETED when nothing is left. No globs: only
        refresh the resources from the storage."""
        for g in globs:
            if not isinstance(g, str) or not g or os.path.isabs(g) or ".." in Path(g).parts:
                raise InvalidRequest(f"checkpointGlobs: {g!r} is not a relative glob inside the "
                                     "checkpoint (e.g. '*.pt' or 'logs/**')")
        uuids = list(dict.fromkeys(uuids))
        roots = self._roots(uuids)
        if globs:
            with self._reader.connect() as conn:
                registered, live = self._registered(conn, uuids), self._live_latest(conn, uuids)
                if registered or live:
                    raise Conflict(_protected_message(conn, registered, live))
        for uuid in uuids:
            root = roots.get(uuid)
            path = checkpoint_dir(root, uuid) if root is not None else None
            if path is None or not path.is_dir():
                raise Conflict(f"checkpoint {uuid}: its files are not visible to the master "
                               f"({path or 'storage not on this host'}); remove them where "
                               "the storage is mounted")
            inside = path.resolve()
            for g in globs:
                for match in sorted(path.glob(g), reverse=True):
                    if inside not in match.resolve().parents:
                        continue  # the directory itself, or out through a symlink: never
                    if match.is_dir() and not match.is_symlink():
                        _remove_dir(match)
                    else:
                        match.unlink(missing_ok=True)
            resources = {p.relative_to(path).as_posix(): str(p.stat().st_size)
                         for p in sorted(path.rglob("*")) if p.is_file()}
            state = "DELETED" if not resources else "PARTIALLY_DELETED" if globs else None
            with self._engine.begin() as conn:
                store.record_files(conn, uuid, resources, state)

    def _roots(self, uuids: list[str]) -> dict[str, Path | None]:
        """Each checkpoint's storage root (its experiment's); NotFound naming the missing ones."""
        with self._reader.connect() as conn:
            configs = store.experiment_configs(conn, uuids)
        found = {uuid: storage_root(config) if config else None for uuid, config in configs.items()}
        missing = [u for u in uuids if u not in found]
        if missing:
            raise NotFound(f"checkpoint(s) not found: {', '.join(missing)}")
        return found


def _protected_message(conn: sa.Connection, registered: set[str], live: dict[str, int]) -> str:
    parts = []
    if registered:
        uses = store.version_uses(conn, registered)
        named = ", ".join(f"{u.checkpoint_uuid} (model {u.name} version {u.version})" for u in uses)
        parts.append(f"checkpoint(s) used by model versions: {named}; delete those versions first")
    if live:
        named = ", ".join(f"{u} (trial {tid})" for u, tid in sorted(live.items()))
        parts.append(f"the latest checkpoint of a trial that is still running: {named}; it resumes "
                     "from it — wait until the trial ends or kill it")
    return "cannot delete " + "; and ".join(parts)


def _remove_dir(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove checkpoint files %s: %s", path, exc)
