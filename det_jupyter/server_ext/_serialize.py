"""Rows → Determined 0.38.1 wire objects (camelCase, enum strings, every required field)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from ..services.accounts.auth import User
from ..services.checkpoints.order import ListedCheckpoint
from ..services.common.states import State
from ..services.experiments.trial_list import TrialValidations, ValidationReport

_second: list = [None, ""]  # the last whole second formatted: reports come in runs of them


def ts(epoch: float | None) -> str | None:
    """RFC 3339 UTC with microseconds (``2026-11-23T01:02:03.456789Z``)."""
    if epoch is None:
        return None
    sec = int(epoch // 1)
    if sec != _second[0]:
        _second[0], _second[1] = sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return f"{_second[1]}.{min(int((epoch - sec) * 1e6), 999_999):06d}Z"


def user(u: User) -> dict[str, Any]:
    """A ``v1User``; ``agentUserGroup`` only where the user is linked with an agent user (the
    names only where they were given)."""
    out: dict[str, Any] = {
        "id": u.id,
        "username": u.username,
        "displayName": u.display_name or "",
        "admin": u.admin,
        "active": u.active,
        "remote": False,
        "modifiedAt": ts(u.modified_at),
    }
    link = u.agent_user_group
    if link is not None:
        out["agentUserGroup"] = {"agentUid": link.uid, "agentGid": link.gid,
                                 **({"agentUser": link.user} if link.user else {}),
                                 **({"agentGroup": link.group} if link.group else {})}
    return out


def pagination(offset: int, limit: int, total: int, returned: int) -> dict[str, int]:
    return {
        "offset": offset,
        "limit": limit,
        "startIndex": min(offset, total),
        "endIndex": min(offset + returned, total),
        "total": total,
    }


def run_state(stored: str, alloc_states: set[str]) -> str:
    """ACTIVE is shown as QUEUED/STARTING/RUNNING from its allocations, as 0.38.1 does."""
    if stored != State.ACTIVE.value:
        return "STATE_" + stored
    if "RUNNING" in alloc_states:
        return "STATE_RUNNING"
    if "PULLING" in alloc_states:
        return "STATE_PULLING"
    if "ASSIGNED" in alloc_states:
        return "STATE_STARTING"
    if "PENDING" in alloc_states:
        return "STATE_QUEUED"
    return "STATE_ACTIVE"


def experiment(row: Any, *, username: str, num_trials: int, alloc_states: set[str],
               best: tuple[int, float] | None = None, trial_ids: list[int] | None = None,
               progress: float | None = None) -> dict[str, Any]:
    cfg = row.config
    out: dict[str, Any] = {
        "id": row.id,
        "name": row.name,
        "description": row.description or "",
        "labels": list(row.labels or []),
        "notes": row.notes or "",
        "state": run_state(row.state, alloc_states),
        "archived": bool(row.archived),
        "config": cfg,
        "originalConfig": row.original_config,
        "jobId": row.job_id,
        "numTrials": num_trials,
        "projectId": row.project_id,
        "projectOwnerId": row.owner_id,
        "projectName": getattr(row, "project_name", ""),
        "workspaceId": getattr(row, "workspace_id", 1),
        "workspaceName": getattr(row, "workspace_name", ""),
        "searcherType": row.searcher_type,
        "searcherMetric": cfg.get("searcher", {}).get("metric"),
        "hyperparameters": cfg.get("hyperparameters"),
        "startTime": ts(row.start_time),
        "endTime": ts(row.end_time),
        "username": username,
        "userId": row.owner_id,
        "displayName": username,
        "resourcePool": cfg.get("resources", {}).get("resource_pool") or "default",
        "progress": row.progress if progress is None else progress,
        "parentArchived": False,
        "unmanaged": False,
        "forkedFrom": row.parent_id,
        "trialIds": trial_ids or [],
    }
    if row.end_time is not None:
        out["duration"] = int((row.end_time - row.start_time) * 1000)
    if best is not None:
        out["bestTrialId"], out["bestTrialSearcherMetric"] = best
    return out


def _metric_summary(summary: dict | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group, metrics in (summary or {}).items():
        key = {"training": "avg_metrics", "validation": "validation_metrics"}.get(group, group)
        out[key] = {
            name: {"count": s["count"], "last": s["last"], "max": s["max"], "min": s["min"], "type": "number"}
            for name, s in metrics.items()
        }
    return out


def trial(row: Any, *, alloc_states: set[str], best_checkpoint: dict | None = None,
          validations: TrialValidations | None = None) -> dict[str, Any]:
    """A ``trialv1Trial``; ``validations``: its best and latest validation reports, shown as
    ``bestValidation`` and ``latestValidation`` (absent when not given)."""
    out: dict[str, Any] = {
        "id": row.id,
        "experimentId": row.experiment_id,
        "hparams": row.hparams,
        "state": run_state(row.state, alloc_states),
        "restarts": row.restarts,
        "startTime": ts(row.start_time),
        "endTime": ts(row.end_time),
        "totalBatchesProcessed": row.total_batches,
        "taskId": row.task_id,
        "taskIds": [row.task_id],
        "runnerState": row.runner_state or "",
        "searcherMetricValue": row.best_validation,
        "summaryMetrics": _metric_summary(row.summary),
        "metadata": row.run_metadata or {},
        "wallClockTime": ((row.end_time or 0) - row.start_time) if row.end_time else None,
    }
    if validations is not None and validations.best is not None:
        out["bestValidation"] = _validation_workload(validations.best)
    if validations is not None and validations.latest is not None:
        out["latestValidation"] = _validation_workload(validations.latest)
    if best_checkpoint is not None:
        out["bestCheckpoint"] = best_checkpoint
    return out


def checkpoint(row: Any, *, trial_row: Any = None, exp_config: dict | None = None,
               listed: ListedCheckpoint | None = None) -> dict[str, Any]:
    """A ``v1Checkpoint``; ``listed``: the same checkpoint with the reports at its step, which
    fill ``training``'s metrics and ``searcherMetric`` (``v1CheckpointTrainingMetadata``)."""
    training: dict[str, Any] = {}
    if trial_row is not None:
        training = {
            "trialId": trial_row.id,
            "experimentId": trial_row.experiment_id,
            "hparams": trial_row.hparams,
            "experimentConfig": exp_config or {},
            "trainingMetrics": {"avgMetrics": (listed and listed.training_metrics) or {}},
            "validationMetrics": {"avgMetrics": (listed and listed.validation_metrics) or {}},
            "searcherMetric": listed.searcher_metric if listed is not None else None,
        }
    return {
        "uuid": row.uuid,
        "taskId": row.task_id,
        "allocationId": row.allocation_id,
        "reportTime": ts(row.report_time),
        "state": "STATE_" + row.state,
        "resources": row.resources or {},
        "metadata": row.ckpt_metadata or {},
        "training": training,
        "storageId": row.storage_id,
    }


def listed_checkpoint(item: ListedCheckpoint, *, trial_row: Any = None,
                      exp_config: dict | None = None) -> dict[str, Any]:
    """``checkpoint`` of a listed one (its row and its metrics)."""
    return checkpoint(item.row, trial_row=trial_row, exp_config=exp_config, listed=item)


def _validation_workload(report: ValidationReport) -> dict[str, Any]:
    """A ``v1MetricsWorkload`` of a validation report."""
    return {"totalBatches": report.steps_completed, "numInputs": 0, "endTime": ts(report.report_time),
            "metrics": {"avgMetrics": report.metrics, "batchMetrics": []}}


def metrics_workload(report: dict, trial_id: int) -> dict[str, Any]:
    return {
        "totalBatches": report["steps_completed"],
        "numInputs": 0,
        "endTime": ts(report["report_time"]),
        "metrics": {"avgMetrics": report["metrics"], "batchMetrics": []},
    }


def metrics_report(report: Mapping[str, Any], trial_id: int, metrics: dict[str, Any]) -> dict[str, Any]:
    """A stored report as ``v1MetricsReport``; ``metrics``: its values under the keys the
    stock client reads (``avg_metrics``, ``validation_metrics``)."""
    return {"id": report["id"], "trialId": trial_id, "trialRunId": report["trial_run_id"],
            "totalBatches": report["steps_completed"], "endTime": ts(report["report_time"]),
            "metrics": metrics, "group": report["group"], "archived": False}


def task_log(row: Any) -> dict[str, Any]:
    """A stored log line as ``v1TaskLogsResponse``."""
    return {
        "id": str(row.id),
        "taskId": row.task_id,
        "allocationId": row.allocation_id,
        "level": "LOG_LEVEL_" + (row.level or "INFO"),
        "message": row.log,
        "log": row.log,
        "timestamp": ts(row.timestamp),
        "agentId": row.agent_id,
        "containerId": row.allocation_id,
        "rankId": row.rank_id,
        "source": row.source,
        "stdtype": row.stdtype,
    }


def trial_log(row: Any, trial_id: int) -> dict[str, Any]:
    """A stored log line as ``v1TrialLogsResponse``."""
    return {**task_log(row), "trialId": trial_id}


def ndjson(obj: Any) -> str:
    return json.dumps({"result": obj}, separators=(",", ":")) + "\n"
