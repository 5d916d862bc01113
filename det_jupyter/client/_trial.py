"""Trials and checkpoints: metrics as plain data, logs, the best checkpoint, downloads."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
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

    def download(self, path: str | Path | None = None) -> Path:
        """Copy the checkpoint's files into ``path`` (default ``./checkpoints/<uuid>``) and
        return it.

        The master serves no checkpoint files; this copies them from the ``shared_fs``
        storage directory, so it works where that directory is visible: on the master's host
        (the laptop setup) or on a shared file system mounted at the same path.
        """
        src = self.storage_dir()
        if not src.is_dir():
            raise InvalidInput(f"checkpoint {self.uuid}: its directory {src} is not visible "
                               "from this machine; download it on the master's host or mount "
                               "the shared file system at the same path")
        dest = Path(path) if path is not None else Path("checkpoints") / self.uuid
        shutil.copytree(src, dest, dirs_exist_ok=True)
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
