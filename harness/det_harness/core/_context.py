"""``core.init()`` composes the sub-contexts, on cluster or off it."""

from __future__ import annotations

import atexit
import logging
import pathlib
import sys
import threading
import types
from typing import Any

from .._errors import APIError, InvalidHP
from ..info import ClusterInfo, get_cluster_info
from ._checkpoint import DEFAULT_LOCAL_ROOT, CheckpointContext, storage_root
from ._distributed import DistributedContext
from ._preempt import LocalPreemptContext, PreemptContext
from ._searcher import DEFAULT_LOCAL_LENGTH, SearcherContext, searcher_length
from ._train import LocalTrainContext, TrainContext

logger = logging.getLogger("det_harness")

CLOSE_TIMEOUT = 60.0  # seconds close() waits for the master to acknowledge queued metrics


class Context:
    """What a training script uses: ``train``, ``checkpoint``, ``preempt``, ``searcher``,
    ``distributed``, ``info`` and ``hparams``. Use it as a context manager."""

    def __init__(
        self,
        *,
        train: TrainContext | LocalTrainContext,
        checkpoint: CheckpointContext,
        preempt: PreemptContext | LocalPreemptContext,
        searcher: SearcherContext,
        distributed: DistributedContext,
        info: ClusterInfo | None,
        hparams: dict[str, Any],
        shipper: Any = None,
        session: Any = None,
        run: Any = None,
        on_close: Any = None,
    ) -> None:
        self.train = train
        self.checkpoint = checkpoint
        self.preempt = preempt
        self.searcher = searcher
        self.distributed = distributed
        self.info = info
        self.hparams = hparams
        self._shipper = shipper
        self._session = session
        #: a tracked run's ids and link (``core.track()``); None in a task or off-cluster
        self.run = run
        self._on_close = on_close  # called with the block's exception (or None) once closed
        self._closed = False

    def __enter__(self) -> Context:
        self.preempt.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: types.TracebackType | None,
    ) -> None:
        self.close(error=exc_val)
        if isinstance(exc_val, InvalidHP):
            # Determined's contract: an invalid-hparams trial exits 0 after telling the searcher.
            self.train.report_early_exit("EXITED_REASON_INVALID_HP")
            # In the trial's log, so its owner sees why it ended.
            print(f"det_harness: invalid hyperparameters ({exc_val}); the searcher was told, "
                  "exiting with code 0", file=sys.stderr, flush=True)
            sys.exit(0)

    def close(self, timeout: float = CLOSE_TIMEOUT, error: BaseException | None = None) -> None:
        """Stop the watcher, wait (at most ``timeout`` s) until queued metrics are acked, and
        close the collective sockets of ``distributed``."""
        if self._closed:
            return
        self._closed = True
        self.preempt.close()
        if self._shipper is not None:
            self._shipper.close(timeout)
        self.distributed.close()
        if self._on_close is not None:
            self._on_close(error)


def _local(hparams: dict | None, checkpoint_storage: Any, max_length: int | None,
           dist: DistributedContext, info: ClusterInfo | None) -> Context:
    root = storage_root(checkpoint_storage) if checkpoint_storage else DEFAULT_LOCAL_ROOT.expanduser()
    train = LocalTrainContext()
    length = DEFAULT_LOCAL_LENGTH if max_length is None else max_length
    return Context(
        train=train,
        checkpoint=CheckpointContext(root, dist),
        preempt=LocalPreemptContext(dist),
        searcher=SearcherContext(length, train.report_progress),
        distributed=dist,
        info=info,
        hparams=dict(hparams or {}),
    )


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | pathlib.Path | dict | None = None,
    hparams: dict | None = None,
    max_length: int | None = None,
) -> Context:
    """Build the Core API context for this process.

    On cluster (a trial task) it talks to the master named by ``DET_MASTER``; off-cluster it
    returns local implementations (metrics in ``ctx.train.history``, checkpoints in a local
    directory, never preempted) so the same script runs in a notebook.

    ``checkpoint_storage`` overrides the experiment's (a path or a ``checkpoint_storage`` dict);
    ``hparams`` and ``max_length`` are used off-cluster only.
    """
    from .._http import Session
    from .._shipper import Shipper

    dist = distributed or DistributedContext.from_torch_distributed()
    info = get_cluster_info()
    if info is None or info.trial is None:
        return _local(hparams, checkpoint_storage, max_length, dist, info)
    trial = info.trial
    storage_cfg = checkpoint_storage if checkpoint_storage is not None else trial.config.get(
        "checkpoint_storage") or {}
    root = storage_root(storage_cfg)
    session = Session(info.master_url, info.session_token)
    storage_id: Any = None
    if dist.is_chief:
        run_cfg = storage_cfg if isinstance(storage_cfg, dict) else {
            "type": "shared_fs", "host_path": str(storage_cfg)}
        # Off the start-up path: only a checkpoint report needs its answer (storageId).
        storage_id = _RunStart(session, {"runId": trial.trial_id, "checkpointStorage": run_cfg}).result
    shipper = Shipper(session, trial.trial_id, trial.run_id)
    # A script that never closes its context still gets its last reports out (bounded wait).
    atexit.register(shipper.close, CLOSE_TIMEOUT)
    length = searcher_length(trial.config)
    train = TrainContext(session, shipper, dist, trial.trial_id, trial.experiment_id)
    return Context(
        train=train,
        checkpoint=CheckpointContext(
            root, dist, session=session, shipper=shipper, allocation_id=info.allocation_id,
            task_id=info.task_id, storage_id=storage_id),
        preempt=PreemptContext(session, info.allocation_id, dist),
        searcher=SearcherContext(length if length is not None else max_length,
                                 train.report_progress),
        distributed=dist,
        info=info,
        hparams=dict(trial.hparams),
        shipper=shipper,
        session=session,
    )


class _RunStart:
    """``POST /api/v1/runs/start`` in a background thread; ``result()`` waits for its storageId."""

    def __init__(self, session: Any, body: dict) -> None:
        self._session = session
        self._body = body
        self._storage_id: int | None = None
        self._thread = threading.Thread(target=self._run, name="det-run-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            resp = self._session.request("POST", "/api/v1/runs/start", self._body)
            self._storage_id = (resp or {}).get("storageId")
        except APIError as exc:
            if exc.status != 404:  # an older master without the route is fine
                logger.warning("det_harness: runs/start failed: %s", exc.message)
        except Exception as exc:  # the master unreachable: checkpoints go without a storageId
            logger.warning("det_harness: runs/start failed: %s", exc)

    def result(self, timeout: float = 60.0) -> int | None:
        self._thread.join(timeout)
        return self._storage_id
