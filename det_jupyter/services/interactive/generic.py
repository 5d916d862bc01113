"""Generic tasks (``det task create|fork|pause|unpause|kill``): 0.38.1's task of an entrypoint
run from a context directory, a kind of interactive task of its own (``GENERIC``).

The pure half: the config (``GenericConfig``), a fork's config (``merge_fork``) and the
task's states (``GenericState``, ``NEXT``). The service half (``GenericTasks``) runs them on
``CommandService``'s machinery: a generic task is a ``commands`` row with one allocation at a
time; its state, the config its user wrote and how it was made are kept in the row's config
(``STATE``, ``USER_CONFIG``, ``ORIGIN``).

As 0.38.1 (``api_generic_tasks.go``): pausing ends the running allocation and unpausing
starts a new one (``<task>.<n+1>``) from the same config and context; a task made with
``noPause`` refuses to pause; killing a task that is already canceled or completed is refused.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import config as expconf
from ...errors import Conflict, InvalidRequest

if TYPE_CHECKING:
    from ..accounts.auth import User
    from .commands import CommandService

KIND = "GENERIC"
STATE = "task_state"  # the row's config key of the task's GenericState
USER_CONFIG = "task_config"  # the config as its user wrote it (forks start from it)
ORIGIN = "task_origin"  # {"forked_from", "parent_id", "no_pause"}

#: 0.38.1's GenericTaskConfig (``master/pkg/model/generic_task_config.go``), strict.
_KEYS = (
    "bind_mounts",
    "environment",
    "resources",
    "entrypoint",
    "work_dir",
    "debug",
    "pbs",
    "slurm",
    "preemption_timeout",
    "description",
)


class GenericState(enum.Enum):
    """``v1GenericTaskState`` without its prefix."""

    ACTIVE = "ACTIVE"
    CANCELED = "CANCELED"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    PAUSED = "PAUSED"
    STOPPING_PAUSED = "STOPPING_PAUSED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_COMPLETED = "STOPPING_COMPLETED"
    STOPPING_ERROR = "STOPPING_ERROR"

    @property
    def wire(self) -> str:
        return f"GENERIC_TASK_STATE_{self.value}"


S = GenericState
#: The allowed transitions, by request: what each may start from, and where it goes.
NEXT: dict[str, dict[GenericState, GenericState]] = {
    "pause": {S.ACTIVE: S.STOPPING_PAUSED},
    "unpause": {S.PAUSED: S.ACTIVE, S.STOPPING_PAUSED: S.ACTIVE},
    "kill": {s: S.STOPPING_CANCELED for s in S if s not in (S.CANCELED, S.COMPLETED)},
}


def after_exit(state: GenericState, exit_code: int | None) -> GenericState:
    """Where an allocation's exit leaves the task (0.38.1's ``getGenericTaskOnAllocationExit``)."""
    if state is S.STOPPING_PAUSED:
        return S.PAUSED
    if state is S.STOPPING_CANCELED:
        return S.CANCELED
    return S.COMPLETED if exit_code == 0 else S.ERROR


def state_of(config: Mapping[str, Any]) -> GenericState:
    try:
        return GenericState(config.get(STATE) or "ACTIVE")
    except ValueError:
        return S.ERROR


@dataclass(frozen=True)
class GenericConfig:
    """A generic task's config, checked: what its command row runs."""

    user_config: dict[str, Any]  # as written (after a fork's merge)
    command_config: dict[str, Any]  # what ``CommandConfig.parse`` takes

    @classmethod
    def parse(cls, raw: Any) -> GenericConfig:
        if not isinstance(raw, dict):
            raise InvalidRequest("the task config must be a YAML mapping with an entrypoint")
        unknown = [k for k in raw if k not in _KEYS]
        if unknown:
            raise InvalidRequest(
                f"the task config has an unknown key {unknown[0]!r}; a generic task "
                f"takes {', '.join(_KEYS)}"
            )
        # The keys commands share are checked as a command's (nested unknown keys refused).
        expconf.check_task_keys(
            {k: v for k, v in raw.items() if k not in ("work_dir", "preemption_timeout")}
        )
        entry = raw.get("entrypoint")
        if isinstance(entry, str) and entry.strip():
            entry = [entry]
        if not (isinstance(entry, list) and entry and all(isinstance(x, str) for x in entry)):
            raise InvalidRequest(
                "invalid generic task config: entrypoint must be a non-empty list "
                f"of strings, got {str(entry)[:80]}"
            )
        res = raw.get("resources") or {}
        if not isinstance(res, dict):
            raise InvalidRequest(
                "config.resources must be a mapping (slots, priority, resource_pool)"
            )
        cmd = {
            "entrypoint": entry,
            "resources": {k: res[k] for k in ("slots", "priority", "resource_pool") if k in res},
            "environment": raw.get("environment") or {},
            "description": raw.get("description") or "Generic Task",
        }
        return cls(dict(raw), cmd)


def merge_fork(
    config: Mapping[str, Any] | None, forked: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A fork's config: the forked task's, each top-level key the request gives replaced
    (0.38.1's ``getConfigBytes``)."""
    return {**(forked or {}), **(config or {})}


class GenericTasks:
    """Create, pause, unpause and kill generic tasks; who may is the caller's check."""

    def __init__(self, commands: CommandService) -> None:
        self._commands = commands

    def create(
        self,
        user: User,
        raw: Any,
        *,
        context: bytes | None,
        workspace_id: int,
        forked_from: str | None = None,
        parent_id: str | None = None,
        no_pause: bool = False,
    ) -> Any:
        cfg = GenericConfig.parse(raw)
        extra = {
            USER_CONFIG: cfg.user_config,
            STATE: S.ACTIVE.value,
            ORIGIN: {"forked_from": forked_from, "parent_id": parent_id, "no_pause": no_pause},
        }
        return self._commands.launch(
            user,
            cfg.command_config,
            None,
            kind=KIND,
            workspace_id=workspace_id,
            extra=extra,
            context=context,
        )

    def pause(self, task_id: str) -> None:
        row = self._commands.get(task_id, KIND)
        if (row.config.get(ORIGIN) or {}).get("no_pause"):
            raise Conflict(f"cannot pause task {task_id}: it was created with no_pause")
        self._move(row, "pause")
        if row.allocation_id and row.alloc_state != "TERMINATED":
            self._commands.stop_allocation(row.allocation_id)
        else:  # nothing runs: it is paused at once
            self._commands.set_generic_state(task_id, S.PAUSED.value)

    def unpause(self, task_id: str) -> None:
        row = self._commands.get(task_id, KIND)
        self._move(row, "unpause")
        self._commands.resume(row)

    def kill(self, task_id: str) -> None:
        row = self._commands.get(task_id, KIND)
        self._move(row, "kill")
        if row.allocation_id and row.alloc_state != "TERMINATED":
            self._commands.stop_allocation(row.allocation_id)
        else:  # paused: nothing to stop
            self._commands.set_generic_state(task_id, S.CANCELED.value)

    def _move(self, row: Any, request: str) -> None:
        state = state_of(row.config)
        target = NEXT[request].get(state)
        if target is None:
            raise Conflict(f"cannot {request} task {row.task_id} in state {state.value}")
        self._commands.set_generic_state(row.task_id, target.value)
