"""Log retention, as 0.38.1 keeps it: an ended trial's logs are kept for its
``log_retention_days`` (set by ``det e set log-retention``, else the experiment config's
``retention_policy.log_retention_days``; -1 or unset: forever), counted from the trial's end;
``det task cleanup-logs`` deletes what has expired.

Not yet: 0.38.1's master-wide default (``retention_policy`` of master.yaml) and its schedule:
expired logs go only when an admin runs the cleanup."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ...errors import Conflict, InvalidRequest, NotFound
from ...store import experiments as exp_store
from ...store import log_retention as store
from ...store import reader
from ..common.clock import Clock
from ..common.states import TERMINAL

#: 0.38.1 keeps the days in a SMALLINT: -1 (forever) to 32767.
MIN_DAYS, MAX_DAYS = -1, 32767
_BATCH = 500


def configured_days(config: Any) -> int | None:
    """``retention_policy.log_retention_days`` of an experiment config (None: not set)."""
    policy = (config or {}).get("retention_policy") if isinstance(config, dict) else None
    days = policy.get("log_retention_days") if isinstance(policy, dict) else None
    return days if isinstance(days, int) and not isinstance(days, bool) else None


def _check_days(days: Any) -> None:
    if isinstance(days, bool) or not isinstance(days, int) or not MIN_DAYS <= days <= MAX_DAYS:
        raise InvalidRequest(f"numDays must be an integer from {MIN_DAYS} (forever) to {MAX_DAYS}, "
                             f"got {days!r}")


class LogRetention:
    def __init__(self, engine: sa.Engine, clock: Clock) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._clock = clock

    def set_for_experiment(self, exp_id: int, days: int) -> None:
        """Keep the ended experiment's trial logs ``days`` after each trial ended (-1: forever);
        the experiment config's ``retention_policy`` says so too."""
        _check_days(days)
        with self._engine.begin() as conn:
            row = exp_store.get(conn, exp_id)
            if row is None:
                raise NotFound(f"experiment {exp_id} not found")
            if row.state not in {s.value for s in TERMINAL}:
                raise Conflict(f"experiment in non terminal state '{row.state}', try again later")
            config = dict(row.config or {})
            config["retention_policy"] = {**(config.get("retention_policy") or {}), "log_retention_days": days}
            exp_store.update(conn, exp_id, config=config)
            store.set_for_experiment(conn, exp_id, days)

    def set_for_trial(self, trial_id: int, days: int) -> None:
        """Keep one trial's logs ``days`` after it ends (-1: forever); as 0.38.1, whatever its
        state (a running trial's count starts when it ends)."""
        _check_days(days)
        with self._engine.begin() as conn:
            if not store.set_for_trial(conn, trial_id, days):
                raise NotFound(f"trial {trial_id} not found")

    def cleanup(self) -> int:
        """Delete the logs of ended trials past their retention; how many log lines went."""
        now = self._clock.now()
        with self._reader.connect() as conn:
            rows = store.ended_trials(conn)
        expired = []
        for r in rows:
            days = r.log_retention_days if r.log_retention_days is not None else configured_days(r.config)
            if days is not None and days >= 0 and r.end_time <= now - days * 86400.0:
                expired.append(r.task_id)
        removed = 0
        for i in range(0, len(expired), _BATCH):
            with self._engine.begin() as conn:
                removed += store.delete_logs(conn, expired[i:i + _BATCH])
        return removed
