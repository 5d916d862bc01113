"""Experiments: state, the verbs (pause, activate, cancel, kill), waiting, trials."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import quote

from ._errors import DetClientError
from ._trial import Checkpoint, Trial, best_checkpoint, strip_state
from .session import Session

TERMINAL_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR", "DELETED"})


class WaitTimeout(DetClientError):
    """``Experiment.wait(timeout=...)`` ran out before the experiment ended."""


class Experiment:
    """An experiment on the master. Attributes are read when the object is made (or listed);
    ``reload()`` reads them again. States are the wire's names without ``STATE_``
    (``"RUNNING"``, ``"PAUSED"``, ``"COMPLETED"``, …)."""

    def __init__(self, session: Session, exp_id: int, data: dict[str, Any] | None = None) -> None:
        self._session = session
        self.id = int(exp_id)
        self._data = data if data is not None else {}
        self.launch_warnings: list[str] = []
        if data is None:
            self.reload()

    def __repr__(self) -> str:
        return f"Experiment(id={self.id}, name={self.name!r}, state={self.state!r})"

    def reload(self) -> Experiment:
        self._data = self._session.get(f"/api/v1/experiments/{self.id}")["experiment"]
        return self

    @property
    def name(self) -> str:
        return str(self._data.get("name") or "")

    @property
    def state(self) -> str:
        return strip_state(self._data.get("state"))

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._data.get("config") or {})

    @property
    def username(self) -> str:
        return str(self._data.get("username") or "")

    @property
    def progress(self) -> float | None:
        return self._data.get("progress")

    @property
    def searcher_type(self) -> str:
        return str(self._data.get("searcherType") or "")

    @property
    def searcher_metric(self) -> str | None:
        return self._data.get("searcherMetric")

    @property
    def best_trial_id(self) -> int | None:
        return self._data.get("bestTrialId")

    @property
    def best_searcher_metric(self) -> float | None:
        return self._data.get("bestTrialSearcherMetric")

    @property
    def num_trials(self) -> int:
        return int(self._data.get("numTrials") or 0)

    @property
    def start_time(self) -> str | None:
        return self._data.get("startTime")

    @property
    def end_time(self) -> str | None:
        return self._data.get("endTime")

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """The master's JSON for this experiment (``v1Experiment``)."""
        return dict(self._data)

    # -- verbs --------------------------------------------------------------------------

    def _verb(self, verb: str) -> Experiment:
        self._session.post(f"/api/v1/experiments/{self.id}/{verb}")
        return self.reload()

    def activate(self) -> Experiment:
        """Start a paused experiment again (trials resume from their latest checkpoints)."""
        return self._verb("activate")

    def pause(self) -> Experiment:
        """Pause: running trials checkpoint and stop; ``activate()`` resumes them."""
        return self._verb("pause")

    def cancel(self) -> Experiment:
        """Stop gracefully: trials checkpoint, the experiment ends ``CANCELED``."""
        return self._verb("cancel")

    def kill(self) -> Experiment:
        """Stop now: trials are killed without a checkpoint; the experiment ends ``CANCELED``."""
        return self._verb("kill")

    def wait(self, *, interval: float = 1.0, timeout: float | None = None,
             on_update: Callable[[Experiment], None] | None = None) -> str:
        """Block until the experiment ends; return its final state (``"COMPLETED"``, …).

        ``on_update`` is called with this experiment after every poll (progress displays).
        Raises ``WaitTimeout`` after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.reload()
            if on_update is not None:
                on_update(self)
            if self.is_terminal:
                return self.state
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"experiment {self.id} is still {self.state} after {timeout}s")
            time.sleep(interval)

    # -- trials, checkpoints, logs -------------------------------------------------------

    def trials(self) -> list[Trial]:
        """The experiment's trials, oldest first."""
        body = self._session.get(f"/api/v1/experiments/{self.id}/trials")
        return [Trial(self._session, t["id"], t) for t in body.get("trials") or []]

    def wait_first_trial(self, *, interval: float = 0.5, timeout: float | None = None) -> Trial | None:
        """The first trial once it exists; ``None`` if the experiment ended without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            trials = self.trials()
            if trials:
                return trials[0]
            if self.reload().is_terminal:
                return None
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"experiment {self.id} has no trial after {timeout}s")
            time.sleep(interval)

    def checkpoints(self, *, sort_by: str | None = None, order_by: str | None = None,
                    limit: int | None = None, states: Sequence[str] = ()) -> list[Checkpoint]:
        """The experiment's checkpoints. ``sort_by`` is a ``checkpointv1SortBy`` name
        (``"SEARCHER_METRIC"``: best first, only validated ones; ``"END_TIME"``, …) or a
        validation metric's name; ``order_by`` ``"ASC"``/``"DESC"``; ``limit`` at most this many;
        ``states`` only these (``"COMPLETED"``, …), filtered by the master before the limit."""
        params: dict[str, Any] = {}
        if states:
            params["states"] = ["STATE_" + s.upper().removeprefix("STATE_") for s in states]
        if sort_by:
            known = {"UUID", "TRIAL_ID", "BATCH_NUMBER", "END_TIME", "STATE", "SEARCHER_METRIC"}
            name = sort_by.upper().removeprefix("SORT_BY_")
            if name in known:
                params["sortByAttr"] = "SORT_BY_" + name
            else:
                params["sortByMetric"] = sort_by
        if order_by:
            params["orderBy"] = "ORDER_BY_" + order_by.upper().removeprefix("ORDER_BY_")
        if limit:
            params["limit"] = limit
        body = self._session.get(f"/api/v1/experiments/{self.id}/checkpoints", **params)
        return [Checkpoint(self._session, c) for c in body.get("checkpoints") or []]

    def patch(self, *, name: str | None = None, description: str | None = None,
              notes: str | None = None, labels: list[str] | None = None) -> Experiment:
        """Change the experiment's name, description, notes or labels (the whole list)."""
        fields = {"name": name, "description": description, "notes": notes, "labels": labels}
        body = {k: v for k, v in fields.items() if v is not None}
        if body:
            self._data = self._session.request("PATCH", f"/api/v1/experiments/{self.id}",
                                               body)["experiment"]
        return self

    def set_resources(self, *, priority: int | None = None, weight: float | None = None,
                      maxSlots: int | None = None) -> Experiment:  # noqa: N803 - the wire's name
        """Change the experiment's job: priority, fair-share weight or max slots."""
        res = {k: v for k, v in (("priority", priority), ("weight", weight), ("maxSlots", maxSlots))
               if v is not None}
        if res:
            self._data = self._session.request("PATCH", f"/api/v1/experiments/{self.id}",
                                               {"resources": res})["experiment"]
        return self

    def set_log_retention(self, days: int) -> None:
        """Keep the (ended) experiment's trial logs ``days`` after each trial ended; -1:
        forever. ``det task cleanup-logs`` deletes what has expired."""
        self._session.request("PUT", f"/api/v1/experiments/{self.id}/retain_logs",
                              {"experimentId": self.id, "numDays": int(days)})

    def delete_tensorboard_files(self) -> None:
        """Remove the experiment's TensorBoard files from its checkpoint storage."""
        self._session.request("DELETE", f"/api/v1/experiments/{self.id}/tensorboard-files")

    def add_label(self, label: str) -> list[str]:
        """Add a label; returns the experiment's labels now."""
        path = f"/api/v1/experiments/{self.id}/labels/{quote(label, safe='')}"
        return list(self._session.request("PUT", path, {}).get("labels") or [])

    def remove_label(self, label: str) -> list[str]:
        """Remove a label; returns the experiment's labels now."""
        path = f"/api/v1/experiments/{self.id}/labels/{quote(label, safe='')}"
        return list(self._session.request("DELETE", path).get("labels") or [])

    @property
    def labels(self) -> list[str]:
        return [str(x) for x in self._data.get("labels") or []]

    @property
    def description(self) -> str:
        return str(self._data.get("description") or "")

    @property
    def notes(self) -> str:
        return str(self._data.get("notes") or "")

    def model_def_tgz(self) -> bytes:
        """The experiment's context directory as a gzipped tar."""
        return base64.b64decode(self._session.get(f"/api/v1/experiments/{self.id}/model_def")["b64Tgz"])

    def top_checkpoint(self) -> Checkpoint | None:
        """The checkpoint with the best searcher metric over all trials (by the validation
        reported at the checkpoint's step); ``None`` if there is no completed checkpoint."""
        scored: list[tuple[Checkpoint, float | None]] = []
        smaller = bool((self.config.get("searcher") or {}).get("smaller_is_better", True))
        for trial in self.trials():
            trial_scored, _ = trial.scored_checkpoints()
            ckpt, value = best_checkpoint(trial_scored, smaller)
            if ckpt is not None:
                scored.append((ckpt, value))
        return best_checkpoint(scored, smaller)[0]

    def logs(self, follow: bool = False) -> Iterator[str]:
        """The first trial's log lines (waiting for the trial to exist when ``follow``)."""
        trial = self.wait_first_trial() if follow else next(iter(self.trials()), None)
        if trial is None:
            return iter(())
        return trial.logs(follow=follow)
