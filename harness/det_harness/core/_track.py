"""``core.track()``: a run recorded into the master from a script or a notebook, with no
cluster task (Determined 0.38.1's unmanaged experiments and trials, ``core_v2``).

    import det_harness as det

    with det.core.track("my-notebook-run", hparams={"lr": 0.1}) as core:
        for step in range(1, 101):
            core.train.report_training_metrics(step, {"loss": 1 / step})
        with core.checkpoint.store_path({"steps_completed": 100}) as (path, uuid):
            ...

It acts as the logged-in user (a token: the argument, ``DET_USER_TOKEN``, the ``det user login``
cache, or ``DET_USER``/``DET_PASS``), creates the experiment (or finds it by
``external_id``) and its trial, starts a run, sends a heartbeat each minute while the context
is open, and ends the trial COMPLETED on a clean exit or ERROR when the block raises. A run
whose process dies without closing is marked ERROR by the master after five minutes without a
heartbeat. Checkpoints go to ``checkpoint_storage`` (a ``shared_fs`` host path the master can
read; default ``~/.local/share/det_harness/checkpoints``).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import threading
from dataclasses import dataclass
from typing import Any

from .._errors import APIError
from ._checkpoint import DEFAULT_LOCAL_ROOT, CheckpointContext, storage_root
from ._distributed import DistributedContext
from ._preempt import LocalPreemptContext
from ._searcher import SearcherContext
from ._train import TrainContext

logger = logging.getLogger("det_harness")

DEFAULT_MASTER = "http://127.0.0.1:8080"
HEARTBEAT_S = 60.0  # as the stock client; the master marks a trial lost after 300 s of silence


@dataclass(frozen=True)
class TrackedRun:
    """What the master made for a tracked run."""

    master: str
    experiment_id: int
    trial_id: int
    run_id: int
    task_id: str
    steps_completed: int
    latest_checkpoint: str | None

    @property
    def url(self) -> str:
        return f"{self.master}/det/experiments/{self.experiment_id}"


def _master(master: str | None) -> str:
    url = (master or os.environ.get("DET_MASTER") or DEFAULT_MASTER).strip().rstrip("/")
    return url if "://" in url else "http://" + url


def _cached_token(master: str) -> str | None:
    """The ``det user login`` cache of det-jupyter's CLI: ``{master: {"active": user,
    "tokens": {user: token}}}`` in ``$DET_JUPYTER_CONFIG_DIR/auth.json``."""
    root = os.environ.get("DET_JUPYTER_CONFIG_DIR") or os.path.expanduser("~/.det-jupyter")
    try:
        with open(os.path.join(root, "auth.json"), encoding="utf-8") as fh:
            entry = json.load(fh).get(master) or {}
        token = (entry.get("tokens") or {}).get(entry.get("active") or "")
    except (OSError, ValueError, AttributeError):
        return None
    return token if isinstance(token, str) and token else None


def _user_session(master: str, token: str | None) -> Any:
    from .._http import Session

    token = token or os.environ.get("DET_USER_TOKEN") or _cached_token(master)
    if token:
        return Session(master, token, user_token=True)
    user, password = os.environ.get("DET_USER"), os.environ.get("DET_PASS")
    if not user:
        raise PermissionError(
            f"det_harness.core.track: not logged in to {master}; run `det user login`, or pass "
            "token=, or set DET_USER_TOKEN (or DET_USER and DET_PASS)")
    anon = Session(master, "", user_token=True)
    body = anon.request("POST", "/api/v1/auth/login", {"username": user, "password": password or ""})
    return Session(master, body["token"], user_token=True)


def _config(name: str, hparams: dict[str, Any], storage: dict[str, Any], metric: str,
            smaller_is_better: bool, max_length: int | None, description: str | None,
            labels: list[str] | None) -> str:
    searcher: dict[str, Any] = {"name": "single", "metric": metric, "smaller_is_better": smaller_is_better}
    if max_length is not None:
        searcher["max_length"] = max_length
    cfg: dict[str, Any] = {"name": name, "searcher": searcher, "checkpoint_storage": storage,
                           "hyperparameters": {k: {"type": "const", "val": v} for k, v in hparams.items()}}
    if description is not None:
        cfg["description"] = description
    if labels:
        cfg["labels"] = list(labels)
    return json.dumps(cfg)  # JSON is YAML: the master reads it as a config file


class _Heartbeat:
    """``PATCH /api/v1/trials/{id}`` every ``HEARTBEAT_S`` from a daemon thread."""

    def __init__(self, session: Any, trial_id: int) -> None:
        self._session = session
        self._trial_id = trial_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="det-track-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._session.request("PATCH", f"/api/v1/trials/{self._trial_id}",
                                      {"trialId": self._trial_id}, retries=1)
            except Exception as exc:  # the master away for a while: the next beat tries again
                logger.warning("det_harness: heartbeat for trial %s failed: %s", self._trial_id, exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


def track(
    name: str = "notebook run",
    *,
    hparams: dict[str, Any] | None = None,
    master: str | None = None,
    token: str | None = None,
    external_id: str | None = None,
    project_id: int | None = None,
    metric: str = "loss",
    smaller_is_better: bool = True,
    max_length: int | None = None,
    checkpoint_storage: str | pathlib.Path | dict | None = None,
    description: str | None = None,
    labels: list[str] | None = None,
) -> Any:
    """A Core API context whose reports go to a new unmanaged experiment (see the module's
    doc). ``external_id`` names the run: tracking it again adds a run to the same trial,
    which resumes from its latest checkpoint (``ctx.run.latest_checkpoint``)."""
    from .._shipper import Shipper
    from ._context import Context

    url = _master(master)
    session = _user_session(url, token)
    if checkpoint_storage is None:
        checkpoint_storage = {"type": "shared_fs", "host_path": str(DEFAULT_LOCAL_ROOT.expanduser())}
    elif not isinstance(checkpoint_storage, dict):
        checkpoint_storage = {"type": "shared_fs",
                              "host_path": str(pathlib.Path(checkpoint_storage).expanduser().resolve())}
    root = storage_root(checkpoint_storage)
    params = dict(hparams or {})
    text = _config(name, params, checkpoint_storage, metric, smaller_is_better, max_length,
                   description, labels)
    create: dict[str, Any] = {"config": text, "unmanaged": True}
    if project_id is not None:
        create["projectId"] = project_id
    try:
        if external_id is None:
            exp = session.request("POST", "/api/v1/experiments", create)["experiment"]
            trial = session.request("POST", "/api/v1/trials", {
                "experimentId": exp["id"], "hparams": params, "unmanaged": True})["trial"]
        else:
            exp = session.request("PUT", f"/api/v1/experiments/by-external-id/{_quote(external_id)}",
                                  create)["experiment"]
            trial = session.request("PUT", "/api/v1/trials", {
                "createTrialRequest": {"experimentId": exp["id"], "hparams": params, "unmanaged": True},
                "externalTrialId": "trial"})["trial"]
        trial_id = int(trial["id"])
        started = session.request("POST", f"/api/v1/trials/{trial_id}/start",
                                  {"trialId": trial_id, "resume": external_id is not None})
        session.request("PATCH", f"/api/v1/trials/{trial_id}", {"trialId": trial_id, "state": "STATE_RUNNING"})
        prepared = session.request("POST", "/api/v1/runs/start",
                                   {"runId": trial_id, "checkpointStorage": checkpoint_storage}) or {}
    except APIError as exc:
        raise APIError(exc.method, exc.path, exc.status,
                       f"det_harness.core.track: the master refused the run: {exc.message}") from None
    run = TrackedRun(master=url, experiment_id=int(exp["id"]), trial_id=trial_id,
                     run_id=int(started.get("trialRunId") or 1), task_id=str(trial.get("taskId") or ""),
                     steps_completed=int(started.get("stepsCompleted") or 0),
                     latest_checkpoint=started.get("latestCheckpoint") or None)
    dist = DistributedContext()
    shipper = Shipper(session, trial_id, run.run_id)
    train = TrainContext(session, shipper, dist, trial_id, run.experiment_id)
    heartbeat = _Heartbeat(session, trial_id)

    def finish(error: BaseException | None) -> None:
        heartbeat.stop()
        state = "STATE_COMPLETED" if error is None else "STATE_ERROR"
        if error is not None:
            logger.error("det_harness: tracked trial %s ends in ERROR: %s", trial_id, error)
        try:
            session.request("PATCH", f"/api/v1/trials/{trial_id}", {"trialId": trial_id, "state": state})
        except Exception as exc:  # the master away: it marks the trial lost after its timeout
            logger.warning("det_harness: could not end trial %s (%s): %s", trial_id, state, exc)

    logger.info("det_harness: tracking experiment %s trial %s at %s", run.experiment_id, trial_id, run.url)
    return Context(
        train=train,
        checkpoint=CheckpointContext(root, dist, session=session, shipper=shipper,
                                     task_id=run.task_id, storage_id=prepared.get("storageId")),
        preempt=LocalPreemptContext(dist),
        searcher=SearcherContext(max_length, train.report_progress),
        distributed=dist,
        info=None,
        hparams=params,
        shipper=shipper,
        session=session,
        run=run,
        on_close=finish,
    )


def _quote(text: str) -> str:
    import urllib.parse

    return urllib.parse.quote(text, safe="")
