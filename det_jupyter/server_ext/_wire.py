"""Parts of Determined 0.38.1's request messages that several routes take: its protobuf
enums' names (from the stock ``determined`` package's bindings) and a context's files."""

from __future__ import annotations

from ._api import ANY, ORDER_BY, array, ident, int64, integer, obj, service_checked, string
from ._base import MAX_BODY

__all__ = ["ORDER_BY", "EXPERIMENT_STATES", "TRIAL_STATES", "CHECKPOINT_STATES", "JOB_STATES",
           "LOG_LEVELS", "METRIC_TYPES", "EXITED_REASONS", "V1_FILE", "CONTEXT", "CHECKPOINT_UUID", "TASK_CONFIG", "LAUNCH",
           "PRIORITY"]

EXPERIMENT_STATES = (
    "STATE_UNSPECIFIED", "STATE_ACTIVE", "STATE_PAUSED", "STATE_STOPPING_COMPLETED",
    "STATE_STOPPING_CANCELED", "STATE_STOPPING_ERROR", "STATE_COMPLETED", "STATE_CANCELED",
    "STATE_ERROR", "STATE_DELETED", "STATE_DELETING", "STATE_DELETE_FAILED", "STATE_STOPPING_KILLED",
    "STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING",
)
TRIAL_STATES = (
    "STATE_UNSPECIFIED", "STATE_ACTIVE", "STATE_PAUSED", "STATE_STOPPING_CANCELED",
    "STATE_STOPPING_KILLED", "STATE_STOPPING_COMPLETED", "STATE_STOPPING_ERROR", "STATE_CANCELED",
    "STATE_COMPLETED", "STATE_ERROR", "STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING",
)
CHECKPOINT_STATES = ("STATE_UNSPECIFIED", "STATE_ACTIVE", "STATE_COMPLETED", "STATE_ERROR",
                     "STATE_DELETED", "STATE_PARTIALLY_DELETED")
JOB_STATES = ("STATE_UNSPECIFIED", "STATE_QUEUED", "STATE_SCHEDULED", "STATE_SCHEDULED_BACKFILLED")
LOG_LEVELS = ("LOG_LEVEL_UNSPECIFIED", "LOG_LEVEL_TRACE", "LOG_LEVEL_DEBUG", "LOG_LEVEL_INFO",
              "LOG_LEVEL_WARNING", "LOG_LEVEL_ERROR", "LOG_LEVEL_CRITICAL")
METRIC_TYPES = ("METRIC_TYPE_UNSPECIFIED", "METRIC_TYPE_TRAINING", "METRIC_TYPE_VALIDATION",
                "METRIC_TYPE_PROFILING")
#: A checkpoint's uuid, as a body names one.
CHECKPOINT_UUID = string(128, min_length=1)
EXITED_REASONS = ("EXITED_REASON_UNSPECIFIED", "EXITED_REASON_INVALID_HP", "EXITED_REASON_INIT_INVALID_HP")


# A file of a context (``v1File``): a path relative to the context's root (no '..', no '\\',
# not absolute), a regular file (48) or directory (53), its bytes in base64.
_SEGMENT = "(?:[^/\\\\.][^/\\\\]*|\\.[^/\\\\.][^/\\\\]*|\\.\\.[^/\\\\]+)"
_FIRST = "(?:[^/\\\\.]|[^/\\\\.][^/\\\\:][^/\\\\]*|\\.[^/\\\\.:][^/\\\\]*|\\.\\.[^/\\\\]+)"
def _stat(maximum: int) -> dict[str, object]:
    """A file's mode, mtime, uid or gid: an int64 under ``maximum``, or "" (the default)."""
    return {"anyOf": [*int64(0, maximum)["anyOf"], {"type": "string", "maxLength": 0}]}


#: The path's rules, the type's values and the content's base64 are checked by the service,
#: file by file, with messages naming the file (``config.context_to_tgz``); the JSON types and
#: the numbers by the body's schema (the service reads any integer there).
def _typed(checked: dict[str, object], rule: dict[str, object]) -> dict[str, object]:
    """``checked`` by the body's schema, and ``rule`` by the service."""
    return {"allOf": [checked, service_checked(rule)]}


V1_FILE = obj(
    ("path",), path=_typed(string(4096), {"type": "string", "pattern": f"^{_FIRST}(?:/{_SEGMENT})*$"}),
    type=_typed({"type": "integer"}, {"type": "integer", "enum": [48, 53]}),
    content=_typed(string(MAX_BODY), {
        "type": "string", "pattern": "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"}),
    mode=_stat(2**32), mtime=_stat(2**40), uid=_stat(2**32), gid=_stat(2**32))
CONTEXT = array(V1_FILE, 100_000)

#: A task's config (``v1LaunchCommandRequest.config`` and the like): what the service reads of
#: it; it checks the values itself (``services.commands.CommandConfig`` and each kind's
#: settings), as Determined checks them against its task config schema.
TASK_CONFIG = {**obj(
    entrypoint={"anyOf": [string(min_length=1), array(string(), 1000, minItems=1)]}, description=string(),
    resources=obj(slots=integer(0), priority=integer(1, 99), resource_pool=string()),
    environment={"type": "object"}, idle_timeout=ANY, notebook_idle_type=string()),
    "description": "checked by the master, like Determined's task config schema"}
#: ``v1Launch{Command,Notebook,Shell,Tensorboard}Request``: config, the context's files, the
#: workspace (Uncategorized when left out) and a template to merge under the config.
LAUNCH = obj(config=TASK_CONFIG, files=CONTEXT, workspaceId=ident(), templateName=string(),
             template_name=string())
#: ``v1Set{Command,Notebook,Shell,Tensorboard}PriorityRequest``.
PRIORITY = obj(priority=integer(1, 99))
