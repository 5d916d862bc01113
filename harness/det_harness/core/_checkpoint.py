"""``core.checkpoint``: shared_fs checkpoints written atomically, then reported to the master.

A checkpoint is written into ``<root>/<uuid>.partial/``, gets ``metadata.json``, and is renamed
to ``<root>/<uuid>/`` only when complete, so a killed trial never leaves a directory that looks
like a checkpoint. Before ``POST /api/v1/checkpoints`` the pending metrics are flushed, so the
master never sees a checkpoint at a step whose metrics it has not stored.

Distributed jobs, as in Determined: ``store_path(shard=False)`` is for the chief only (another
rank gets a RuntimeError); ``store_path(shard=True)`` is a collective that every rank calls: all
ranks write their own files into the same ``<uuid>.partial/`` (on the shared file system), and
once every rank has left its block the chief merges their metadata, completes the checkpoint
and reports it with the union of their files.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import shutil
import time
import uuid
from collections.abc import Iterator
from typing import Any

from .._buffer import iso_utc
from .._http import Session
from .._shipper import Shipper
from ._distributed import DistributedContext

logger = logging.getLogger("det_harness")

DEFAULT_LOCAL_ROOT = pathlib.Path("~/.local/share/det_harness/checkpoints")


def storage_root(storage: Any, environ: dict[str, str] | None = None) -> pathlib.Path:
    """The directory holding checkpoints for a ``checkpoint_storage`` config (or a path).

    ``DET_SHARED_FS_HOST_PATH`` wins over the config's ``host_path`` (the master sets it so the
    harness needs no mount); ``storage_path`` is joined below it.
    """
    env = os.environ if environ is None else environ
    if isinstance(storage, (str, os.PathLike)):
        return pathlib.Path(storage).expanduser()
    storage = storage or {}
    if not isinstance(storage, dict):
        raise TypeError(f"checkpoint_storage must be a path or a dict, not {type(storage).__name__}")
    kind = storage.get("type", "shared_fs")
    if kind == "directory":
        base = storage.get("container_path")
    elif kind == "shared_fs":
        base = env.get("DET_SHARED_FS_HOST_PATH") or storage.get("host_path")
    else:
        raise ValueError(f"checkpoint_storage type {kind!r} is not supported by det_harness; "
                         "use shared_fs (host_path) or directory (container_path)")
    if not base:
        raise ValueError("checkpoint_storage has no host_path; set checkpoint_storage.host_path "
                         "in the experiment config")
    root = pathlib.Path(base).expanduser()
    if storage.get("storage_path"):
        root = root / storage["storage_path"]
    return root


def merge_metadata(all_metadata: list[dict]) -> tuple[dict, dict[str, list[int]]]:
    """Merge the ranks' metadata dicts (index = rank) as Determined does.

    Nested dicts are merged key by key; a key that two ranks give different non-dict values is
    a conflict. Returns ``(merged, {"/path/of/key": [ranks giving it]})``.
    """
    merged: dict = {}
    owners: dict[str, list[int]] = {}
    conflicts: dict[str, list[int]] = {}

    def merge(into: dict, part: dict, rank: int, prefix: str) -> None:
        for key, value in part.items():
            path = f"{prefix}/{key}"
            owners.setdefault(path, []).append(rank)
            if isinstance(value, dict) and isinstance(into.get(key, {}), dict):
                merge(into.setdefault(key, {}), value, rank, path)
            elif key in into and into[key] != value:
                conflicts[path] = list(owners[path])
            else:
                into[key] = value

    for rank, part in enumerate(all_metadata):
        merge(merged, part, rank, "")
    return merged, conflicts


def _resources(path: pathlib.Path) -> dict[str, str]:
    # Determined's shape: relative path -> size as a string; directories end with "/", size "0".
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        rel = pathlib.Path(dirpath).relative_to(path)
        for d in dirnames:
            out[f"{(rel / d).as_posix()}/"] = "0"
        for f in filenames:
            out[(rel / f).as_posix()] = str(os.path.getsize(os.path.join(dirpath, f)))
    return out


class CheckpointContext:
    """Stores, restores and describes checkpoints. ``session=None`` means off-cluster."""

    def __init__(
        self,
        root: pathlib.Path,
        dist: DistributedContext,
        *,
        session: Session | None = None,
        shipper: Shipper | None = None,
        allocation_id: str = "",
        task_id: str = "",
        storage_id: Any = None,  # an id, or a callable that returns it (runs/start in flight)
        flush_timeout: float = 60.0,
    ) -> None:
        self.root = root
        self._dist = dist
        self._session = session
        self._shipper = shipper
        self._allocation_id = allocation_id
        self._task_id = task_id
        self._storage_id = storage_id
        self._flush_timeout = flush_timeout

    @staticmethod
    def _check_metadata(metadata: Any, *, need_steps: bool = True) -> dict:
        if metadata is None and not need_steps:
            return {}
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict, not {type(metadata).__name__}")
        if need_steps and "steps_completed" not in metadata:
            raise ValueError("checkpoint metadata must contain 'steps_completed' "
                             "(the number of steps trained when the checkpoint was taken)")
        return dict(metadata)

    def store_path(
        self, metadata: dict | None = None, *, shard: bool = False,
    ) -> contextlib.AbstractContextManager[tuple[pathlib.Path, str]]:
        """Yield ``(path, storage_id)``: write the checkpoint's files under ``path``.

        When the block exits normally the checkpoint is completed atomically and reported;
        when it raises, the partial directory is removed. ``metadata`` must hold
        ``steps_completed``.

        ``shard=False``: only the chief (rank 0) may call it. ``shard=True``: every rank must
        call it (a synchronisation point, even for ranks that write nothing); they share one
        ``storage_id`` and directory, their metadata dicts are merged (only the merged one needs
        ``steps_completed``), and the checkpoint is reported once every rank's block has ended.
        If any rank's block raises, nothing is kept and every rank raises.
        """
        if shard and self._dist.size > 1:
            return self._store_sharded(self._check_metadata(metadata, need_steps=False))
        if not self._dist.is_chief:
            raise RuntimeError("cannot call CheckpointContext.store_path(shard=False) from a "
                               f"non-chief worker (rank={self._dist.rank}); store checkpoints "
                               "from rank 0, or call store_path(shard=True) on every rank")
        return self._store_single(self._check_metadata(metadata))

    @contextlib.contextmanager
    def _store_single(self, metadata: dict) -> Iterator[tuple[pathlib.Path, str]]:
        storage_id = str(uuid.uuid4())
        partial = self.root / f"{storage_id}.partial"
        partial.mkdir(parents=True)
        try:
            yield partial, storage_id
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        self._finish(partial, storage_id, metadata)

    @contextlib.contextmanager
    def _store_sharded(self, metadata: dict) -> Iterator[tuple[pathlib.Path, str]]:
        dist = self._dist
        # One round agrees on the id and the merged metadata, so every rank raises the same
        # error (or none) before anything is written.
        entries = dist.allgather((str(uuid.uuid4()) if dist.is_chief else None, metadata))
        storage_id = entries[0][0]
        merged, conflicts = merge_metadata([m for _, m in entries])
        if conflicts:
            raise ValueError("ranks gave different values for the same checkpoint metadata: "
                             + ", ".join(f"{k} by ranks {r}" for k, r in sorted(conflicts.items())))
        self._check_metadata(merged)
        partial = self.root / f"{storage_id}.partial"
        error: Exception | None = None
        try:
            partial.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            error = exc  # still settled below: the other ranks must not wait for this one
        if error is None:
            try:
                yield partial, storage_id
            except Exception as exc:  # a KeyboardInterrupt ends the process; the others see it
                error = exc
        outcome, chief_error = self._settle(storage_id, partial, merged, error)
        if error is not None:
            raise error
        if chief_error is not None:
            raise chief_error
        if outcome is not None:
            raise RuntimeError(outcome)

    def _settle(self, storage_id: str, partial: pathlib.Path, metadata: dict,
                error: Exception | None) -> tuple[str | None, Exception | None]:
        """After every rank's block: the chief completes the checkpoint unless a rank failed;
        every rank learns the outcome (None when saved, else why not)."""
        dist = self._dist
        failures = dist.gather(None if error is None else f"{type(error).__name__}: {error}")
        outcome: str | None = None
        chief_error: Exception | None = None
        if failures is not None:  # the chief
            failed = {rank: why for rank, why in enumerate(failures) if why is not None}
            if failed:
                shutil.rmtree(partial, ignore_errors=True)
                outcome = (f"checkpoint {storage_id} was not saved: the store_path block failed "
                           f"on rank(s) {sorted(failed)}: "
                           + "; ".join(f"rank {r}: {why}" for r, why in sorted(failed.items())))
            else:
                try:
                    self._finish(partial, storage_id, metadata)
                except Exception as exc:
                    outcome = f"the chief could not complete checkpoint {storage_id}: {exc}"
                    chief_error = exc
        return dist.broadcast(outcome), chief_error

    def _finish(self, partial: pathlib.Path, storage_id: str, metadata: dict) -> None:
        (partial / "metadata.json").write_text(json.dumps(metadata, indent=2, default=str))
        final = self.root / storage_id
        os.rename(partial, final)
        resources = _resources(final)
        if self._session is None:
            logger.info("det_harness: checkpoint %s stored at %s", storage_id, final)
            return
        if self._shipper is not None and not self._shipper.flush(self._flush_timeout):
            logger.warning("det_harness: reporting checkpoint %s before all metrics were "
                           "acknowledged (the master is slow or unreachable)", storage_id)
        body = {
            "uuid": storage_id,
            "allocationId": self._allocation_id or None,  # none for a tracked run
            "taskId": self._task_id,
            "metadata": metadata,
            "resources": resources,
            "state": "STATE_COMPLETED",
            "training": {},
            "reportTime": iso_utc(time.time()),
            "storageId": self._storage_id() if callable(self._storage_id) else self._storage_id,
        }
        self._session.request("POST", "/api/v1/checkpoints", body)

    def upload(self, ckpt_dir: str | os.PathLike | None, metadata: dict | None = None, *,
               shard: bool = False) -> str:
        """Copy the directory ``ckpt_dir`` into storage as a new checkpoint; return its id.

        With ``shard=True`` every rank calls it, and a rank with nothing to add passes
        ``ckpt_dir=None``; ranks must not upload files with the same relative path.
        """
        src = None if ckpt_dir is None else pathlib.Path(ckpt_dir)
        if src is None and not (shard and self._dist.size > 1):
            raise ValueError("ckpt_dir=None is only allowed with shard=True on a distributed job")
        with self.store_path(metadata, shard=shard) as (path, storage_id):
            # Checked inside the block: with shard=True every rank then learns of the failure.
            if src is not None and not src.is_dir():
                raise FileNotFoundError(f"checkpoint directory {src} does not exist")
            if src is not None:
                shutil.copytree(src, path, dirs_exist_ok=True)
        return storage_id

    def _path(self, storage_id: str) -> pathlib.Path:
        if not storage_id or "/" in storage_id or storage_id.startswith("."):
            raise ValueError(f"{storage_id!r} is not a checkpoint id (a uuid)")
        path = self.root / storage_id
        if not path.is_dir():
            raise FileNotFoundError(f"checkpoint {storage_id} not found under {self.root}; "
                                    "check the experiment's checkpoint_storage")
        return path

    def download(self, storage_id: str, ckpt_dir: str | os.PathLike) -> None:
        """Copy checkpoint ``storage_id`` into ``ckpt_dir`` (created if missing)."""
        shutil.copytree(self._path(storage_id), pathlib.Path(ckpt_dir), dirs_exist_ok=True)

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield the checkpoint's directory to read from (shared_fs: no copy; do not modify)."""
        yield self._path(storage_id)

    def get_metadata(self, storage_id: str) -> dict:
        """The checkpoint's metadata (from the master on cluster, from metadata.json off it)."""
        if self._session is not None:
            resp = self._session.request("GET", f"/api/v1/checkpoints/{storage_id}")
            return dict(((resp or {}).get("checkpoint") or {}).get("metadata") or {})
        return json.loads((self._path(storage_id) / "metadata.json").read_text())
