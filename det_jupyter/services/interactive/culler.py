"""The idle culler: when a running notebook, TensorBoard or shell has been idle for its
``idle_timeout``, it is killed.

Evidence of activity, in memory only: the proxy's traffic (``touched``), the task's own
reports (``report_idle``), and looks at a Jupyter server's kernels, terminals, sessions and
status, one per ``interval_s`` per task (none while the task reports itself). A task whose
server does not answer a look is never culled for it. ``sweep`` decides with no I/O.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..common.clock import Clock
from ._common import Activity, is_active
from ._probe import epoch, get_json
from .kinds import KINDS

log = logging.getLogger("det_jupyter.notebooks")

#: Seconds between looks at every running notebook's activity (``notebook_idle_check``).
IDLE_CHECK_INTERVAL = 30.0


@dataclass
class _Idle:
    """What the culler knows of one task (a moment not seen yet is None, or a time that
    never counts)."""

    last_traffic: float = 0.0  # the proxy's last request to it
    last_active: float | None = None  # when it was last seen or reported active
    looked: float | None = None  # when the master last looked at its Jupyter server
    reported: float = float("-inf")  # when the task last reported (report_idle)
    previous: Activity | None = None  # what the last look saw
    unanswered: bool = False  # its last look got no answer: never culled for it


class IdleCuller:
    def __init__(self, clock: Clock, *, cull: Callable[[Any, str], None], upstream_token: Callable[[Any], str],
                 gpu_busy: Callable[[str], bool] | None = None, interval_s: float = IDLE_CHECK_INTERVAL) -> None:
        """``cull(row, reason)`` kills a task found idle; ``upstream_token(row)`` is the token a
        look at its server carries; ``gpu_busy(allocation_id)``: whether a GPU of the task is
        in use (activity for idle types that count it)."""
        self._clock = clock
        self._cull = cull
        self._token = upstream_token
        self._gpu_busy = gpu_busy or (lambda _allocation_id: False)
        self.interval_s = interval_s
        self._idle: dict[str, _Idle] = {}  # by task id, until the task is dropped
        # Ready tasks with an idle_timeout, by id: what the sweep goes over (rows of the tick).
        self.watched: dict[str, Any] = {}

    # -- evidence ---------------------------------------------------------------------------

    def became_ready(self, task_id: str) -> None:
        """The task's server answered for the first time: that is activity, and a look."""
        idle = self._idle_of(task_id)
        idle.last_active = idle.looked = self._clock.now()

    def touched(self, task_id: str) -> None:
        """Traffic through the proxy: a notebook in use is not idle."""
        self._idle_of(task_id).last_traffic = self._clock.now()

    def report_idle(self, task_id: str, idle: bool) -> None:
        """The task's own report (``PUT /api/v1/notebooks/{id}/report_idle``, sent by a
        notebook's idle checker): not idle counts as activity now. While a task reports, the
        master does not look at its Jupyter server itself."""
        now = self._clock.now()
        state = self._idle_of(task_id)
        state.reported = now
        state.unanswered = False
        if not idle:
            state.last_active = now

    def forget(self, task_id: str) -> None:
        self.watched.pop(task_id, None)
        self._idle.pop(task_id, None)

    # -- the tick's part --------------------------------------------------------------------

    async def tick(self, ready_rows: Iterable[Any]) -> None:
        """Watch the ready tasks that have an idle_timeout, look at the Jupyter servers whose
        look is due, then cull what ``sweep`` finds idle."""
        now = self._clock.now()
        self.watched = {r.task_id: r for r in ready_rows if r.idle_timeout}
        due = [r for r in self.watched.values() if KINDS[r.task_type].jupyter_idle
               and self._look_due(r.task_id, now)]
        if due:
            await asyncio.gather(*(self._look(r, now) for r in due))
        for row, why in self.sweep(self._clock.now()):
            self._cull(row, why)

    def sweep(self, now: float) -> list[tuple[Any, str]]:
        """The watched tasks idle for their ``idle_timeout``, and why: memory only (what the
        looks, the tasks' own reports and the proxy's traffic recorded), no I/O."""
        out = []
        for task_id, row in self.watched.items():
            idle = self._idle.get(task_id) or _Idle()
            if idle.unanswered:
                continue  # not answering: not evidence of idleness
            since = max(now if idle.last_active is None else idle.last_active, idle.last_traffic)
            timeout = row.idle_timeout
            if now - since < timeout:
                continue
            why = (f"notebook_idle_type {row.idle_type or 'kernels_or_terminals'}, "
                   "no proxy traffic" if KINDS[row.task_type].jupyter_idle else "no proxy traffic")
            out.append((row, f"culled: idle for {now - since:.0f} s (idle_timeout {timeout:g} s, {why})"))
        return out

    def _idle_of(self, task_id: str) -> _Idle:
        idle = self._idle.get(task_id)
        if idle is None:
            idle = self._idle[task_id] = _Idle()
        return idle

    def _look_due(self, task_id: str, now: float) -> bool:
        """A look at a Jupyter server is due once per ``interval_s`` (counted from its
        readiness), unless the task itself reported within twice that."""
        idle = self._idle.get(task_id) or _Idle()
        looked = now if idle.looked is None else idle.looked
        return now - looked >= self.interval_s and now - idle.reported >= 2 * self.interval_s

    async def _look(self, row: Any, now: float) -> None:
        """One look at a notebook server's kernels, terminals, sessions and status."""
        idle = self._idle_of(row.task_id)
        idle.looked = now
        token = self._token(row)
        kernels, terminals, sessions, status = await asyncio.gather(
            *(get_json(row, token, path) for path in
              ("api/kernels", "api/terminals", "api/sessions", "api/status")))
        if kernels is None or status is None:
            idle.unanswered = True
            return
        idle.unanswered = False
        seen = Activity(
            kernels=len(kernels), busy_kernels=sum(k.get("execution_state") == "busy" for k in kernels),
            kernel_connections=sum(int(k.get("connections") or 0) for k in kernels),
            terminals=len(terminals or []), sessions=len(sessions or []),
            last_activity=epoch(status.get("last_activity")))
        idle_type = row.idle_type or "kernels_or_terminals"
        if is_active(idle_type, seen, idle.previous, self._gpu_busy(row.allocation_id)):
            idle.last_active = now
        idle.previous = seen


def gpu_in_use(agents: Iterable[Mapping[str, Any]], allocation_id: str) -> bool:
    """Whether a GPU slot of the allocation is in use, by its agents' last slot stats (what a
    resource manager's ``describe()`` lists)."""
    for agent in agents:
        used = agent["used"]
        for slot in (used.get(allocation_id) if isinstance(used, dict) else None) or []:
            stats = agent["stats"].get(slot) or {}
            if int(stats.get("gpu_util") or 0) > 0:
                return True
    return False
