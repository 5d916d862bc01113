"""Trials and checkpoints: metrics as plain data, logs, the best checkpoint, downloads."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ._errors import InvalidInput
from .session import Session


def strip_state(state: str | None) -> str:
    """``STATE_COMPLETED`` → ``COMPLETED`` (the wire's enum names, without the prefix)."""
    return (state or "").removeprefix("STATE_")


class Checkpoint:
    """A checkpoint: ``uuid``, ``state``, ``steps_completed``, ``metadata``, ``resources``
    (file → size) and the trial and experiment it came from."""

    def __init__(self, session: Session, data: dict[str, Any]) -> None:
        self._session = session
        self._data = data
        self.uuid: str = data["uuid"]

    def __repr__(self) -> str:
        return f"Checkpoint(uuid={self.uuid!r}, trial_id={self.trial_id}, steps={self.steps_completed})"

    @property
    def state(self) -> str:
        return strip_state(self._data.get("state"))

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._data.get("metadata") or {})

    @property
    def resources(self) -> dict[str, Any]:
        return dict(self._data.get("resources") or {})

    @property
    def steps_completed(self) -> int | None:
        value = self.metadata.get("steps_completed")
        return int(value) if isinstance(value, (int, float)) else None

    @property
    def trial_id(self) -> int | None:
        return (self._data.get("training") or {}).get("trialId")

    @property
    def experiment_id(self) -> int | None:
        return (self._data.get("training") or {}).get("experimentId")

    @property
    def experiment_config(self) -> dict[str, Any]:
        return dict((self._data.get("training") or {}).get("experimentConfig") or {})

    def to_dict(self) -> dict[str, Any]:
        """The master's JSON for this checkpoint (``v1Checkpoint``)."""
        return dict(self._data)

    def storage_dir(self) -> Path:
        """Where the checkpoint's files are: ``host_path[/storage_path]/<uuid>`` of a
        ``shared_fs`` storage (or ``container_path`` of ``directory``)."""
        storage = self.experiment_config.get("checkpoint_storage") or {}
        kind = storage.get("type", "shared_fs")
        base = storage.get("host_path") if kind == "shared_fs" else storage.get("container_path")
        if kind not in ("shared_fs", "directory") or not base:
            raise InvalidInput(f"checkpoint {self.uuid}: storage type {kind!r} cannot be read "
                               "from here; only shared_fs and directory storages can")
        root = Path(base).expanduser()
        if storage.get("storage_path"):
            root = root / storage["storage_path"]
        return root / self.uuid

    def validation_metrics(self) -> dict[str, Any]:
        """The validation reported at this checkpoint's step (``{}`` if none)."""
        return dict(((self._data.get("training") or {}).get("validationMetrics") or {})
                    .get("avgMetrics") or {})

    def size(self) -> int:
        """Total bytes of its files, as the master recorded them."""
        total = 0
        for value in self.resources.values():
            try:
                total += int(value)
            except (TypeError, ValueError):
                continue
        return total

    def download(self, path: str | Path | None = None, *,
                 on_progress: Callable[[int, int], None] | None = None,
                 mode: str = "auto") -> Path:
        """Copy the checkpoint's files into ``path`` (default ``./checkpoints/<uuid>``) and
        return it. ``on_progress(bytes_copied, bytes_total)`` is called as files are copied.

        ``mode`` as the stock SDK's ``DownloadMode``: ``direct`` copies from the ``shared_fs``
        storage directory (where it is visible: the master's host, or a shared file system
        mounted at the same path); ``master`` streams the files through the master
        (``GET /checkpoints/{uuid}``); ``auto`` (the default) copies directly where the
        directory is visible and through the master elsewhere.
        """
        if mode not in ("auto", "direct", "master"):
            raise InvalidInput(f"download mode {mode!r}: use auto, direct or master")
        dest = Path(path) if path is not None else Path("checkpoints") / self.uuid
        if mode == "master":
            return self._download_via_master(dest, on_progress)
        try:
            src = self.storage_dir()
        except InvalidInput:
            if mode == "direct":
                raise
            return self._download_via_master(dest, on_progress)
        if not src.is_dir():
            if mode == "auto":
                return self._download_via_master(dest, on_progress)
            raise InvalidInput(f"checkpoint {self.uuid}: its directory {src} is not visible "
                               "from this machine; download it through the master "
                               "(mode master) or mount the shared file system at the same path")
        files = sorted(p for p in src.rglob("*") if p.is_file() and not p.is_symlink())
        total = sum(p.stat().st_size for p in files)
        done = 0
        if on_progress is not None:
            on_progress(done, total)
        for f in files:
            target = dest / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            with f.open("rb") as fin, target.open("wb") as fout:
                while chunk := fin.read(1 << 20):
                    fout.write(chunk)
                    done += len(chunk)
                    if on_progress is not None:
                        on_progress(done, total)
            shutil.copystat(f, target)
        for d in (p for p in src.rglob("*") if p.is_dir()):  # empty directories too
            (dest / d.relative_to(src)).mkdir(parents=True, exist_ok=True)
        os.makedirs(dest, exist_ok=True)
        return dest

    def _download_via_master(self, dest: Path,
                             on_progress: Callable[[int, int], None] | None) -> Path:
        """The files as the master streams them (a tar archive), unpacked into ``dest`` with
        tarfile's ``data`` filter (no links out, no absolute paths, no devices)."""
        import tarfile

        sizes = [v for v in self.resources.values() if isinstance(v, (int, float))]
        total, done = int(sum(sizes)), 0
        if on_progress is not None:
            on_progress(done, total)
        dest.mkdir(parents=True, exist_ok=True)
        with self._session.open_stream(f"/checkpoints/{self.uuid}", accept="application/x-tar") as resp:
            try:
                with tarfile.open(fileobj=resp, mode="r|") as tar:
                    for member in tar:
                        tar.extract(member, dest, filter="data")
                        if member.isfile():
                            done += member.size
                            if on_progress is not None:
                                on_progress(done, max(total, done))
            except (tarfile.TarError, OSError) as exc:
                raise InvalidInput(f"checkpoint {self.uuid}: the download through the master "
                                   f"broke off ({exc}); try again") from None
        return dest


def _better(a: float, b: float, smaller_is_better: bool) -> bool:
    return a < b if smaller_is_better else a > b


def best_checkpoint(scored: list[tuple[Checkpoint, float | None]],
                    smaller_is_better: bool) -> tuple[Checkpoint | None, float | None]:
    """The checkpoint with the best searcher metric; without any metric, the latest one."""
    best: tuple[Checkpoint | None, float | None] = (None, None)
    for ckpt, value in scored:
        if value is None:
            continue
        if best[1] is None or _better(value, best[1], smaller_is_better):
            best = (ckpt, value)
    if best[0] is None and scored:
        latest = max(scored, key=lambda cv: cv[0].steps_completed or 0)[0]
        return latest, None
    return best


class Trial:
    """One trial of an experiment. Attributes are read from the master when the object is
    made; ``reload()`` reads them again."""

    def __init__(self, session: Session, trial_id: int, data: dict[str, Any] | None = None) -> None:
        self._session = session
        self.id = int(trial_id)
        self._data = data if data is not None else {}
        if data is None:
            self.reload()

    def __repr__(self) -> str:
        return f"Trial(id={self.id}, state={self.state!r})"

    def reload(self) -> Trial:
        self._data = self._session.get(f"/api/v1/trials/{self.id}")["trial"]
        return self

    @property
    def experiment_id(self) -> int:
        return int(self._data["experimentId"])

    @property
    def state(self) -> str:
        return strip_state(self._data.get("state"))

    @property
    def hparams(self) -> dict[str, Any]:
        return dict(self._data.get("hparams") or {})

    @property
    def restarts(self) -> int:
        return int(self._data.get("restarts") or 0)

    @property
    def total_batches(self) -> int:
        return int(self._data.get("totalBatchesProcessed") or 0)

    @property
    def searcher_metric(self) -> float | None:
        return self._data.get("searcherMetricValue")

    @property
    def task_id(self) -> str:
        return str(self._data.get("taskId") or "")

    def to_dict(self) -> dict[str, Any]:
        """The master's JSON for this trial (``v1Trial``)."""
        return dict(self._data)

    def _workloads(self, kind: str, body: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if body is None:
            body = self._session.get(f"/api/v1/trials/{self.id}/workloads")
        out = []
        for w in body.get("workloads") or []:
            if kind in w:
                item = w[kind]
                out.append({"trial_id": self.id, "steps_completed": item.get("totalBatches"),
                            "end_time": item.get("endTime"),
                            "metrics": dict((item.get("metrics") or {}).get("avgMetrics") or {})})
        return out

    def training_metrics(self) -> list[dict[str, Any]]:
        """Every training report, oldest first: ``{"trial_id", "steps_completed",
        "end_time", "metrics": {name: value}}``."""
        return self._workloads("training")

    def validation_metrics(self) -> list[dict[str, Any]]:
        """Every validation report, oldest first, shaped like ``training_metrics()``."""
        return self._workloads("validation")

    def metrics(self) -> dict[str, list[dict[str, Any]]]:
        """``{"training": training_metrics(), "validation": validation_metrics()}`` from one
        request."""
        body = self._session.get(f"/api/v1/trials/{self.id}/workloads")
        return {"training": self._workloads("training", body),
                "validation": self._workloads("validation", body)}

    def logs(self, follow: bool = False) -> Iterator[str]:
        """The trial's log lines (without the trailing newline); with ``follow`` the stream
        goes on until the trial ends."""
        params = {"follow": "true"} if follow else None
        for entry in self._session.stream(f"/api/v1/trials/{self.id}/logs", params,
                                          timeout=None if follow else 120):
            yield str(entry.get("message") or entry.get("log") or "").rstrip("\n")

    def log_tail(self, n: int = 50) -> list[str]:
        """The trial's last ``n`` log lines, oldest first (one request, however long the log)."""
        params = {"limit": n, "orderBy": "ORDER_BY_DESC"}
        lines = [str(e.get("message") or e.get("log") or "").rstrip("\n")
                 for e in self._session.stream(f"/api/v1/trials/{self.id}/logs", params, timeout=60)]
        return lines[::-1]

    def checkpoints(self) -> list[Checkpoint]:
        body = self._session.get(f"/api/v1/trials/{self.id}/checkpoints")
        return [Checkpoint(self._session, c) for c in body.get("checkpoints") or []]

    def kill(self) -> Trial:
        """Kill this trial now (no checkpoint); the rest of its experiment goes on."""
        self._session.post(f"/api/v1/trials/{self.id}/kill")
        return self.reload()

    def set_log_retention(self, days: int) -> None:
        """Keep this trial's logs ``days`` after it ends; -1: forever."""
        self._session.request("PUT", f"/api/v1/trials/{self.id}/retain_logs",
                              {"trialId": self.id, "numDays": int(days)})

    def scored_checkpoints(self) -> tuple[list[tuple[Checkpoint, float | None]], bool]:
        """Completed checkpoints, each with the searcher metric validated at its step, and
        whether smaller is better."""
        ckpts = [c for c in self.checkpoints() if c.state == "COMPLETED"]
        if not ckpts:
            return [], True
        searcher = ckpts[0].experiment_config.get("searcher") or {}
        metric = searcher.get("metric")
        by_step = {v["steps_completed"]: v["metrics"].get(metric) for v in self.validation_metrics()}
        scored = []
        for c in ckpts:
            value = by_step.get(c.steps_completed)
            scored.append((c, float(value) if isinstance(value, (int, float)) else None))
        return scored, bool(searcher.get("smaller_is_better", True))

    def top_checkpoint(self) -> Checkpoint | None:
        """The checkpoint with the best searcher metric (the latest one if none was
        validated); ``None`` when the trial has no completed checkpoint."""
        scored, smaller = self.scored_checkpoints()
        return best_checkpoint(scored, smaller)[0]
