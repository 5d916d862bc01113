"""The bootstrap of a task that runs as a Kubernetes pod, with no det-agent on the node.

``python3 -m det_agent.pod SPEC_JSON`` does inside the pod what the process runtime does on an
agent's host before it starts a task, then execs the task in its own place, so the pod's exit
code is the task's and the task's output is the pod log. The spec file (a Secret's)::

    {"spec": <TaskSpec wire dict, as ProcessRuntime.start receives it>,
     "agent_id": "<node name>", "slot_types": {"0": "cuda"}, "run_dir": "/run/determined"}

``run_dir`` (default ``/run/determined``; an emptyDir the master mounts, writable by the pod's
uid) becomes the task's ``/run/determined``: ``info/`` (the spec's info files), ``home/``
(HOME), ``workdir/`` (the context, and the working directory), ``train/model/`` (a TRIAL's
context snapshot). The task's environment is ``build_env``'s over the process runtime's
allowlisted part of the pod's own (PATH, locale, LD_LIBRARY_PATH, NVIDIA_*…); nothing else of
the pod's environment reaches it. The pod's securityContext decides the uid: the bootstrap
switches no user and mounts nothing (``runtime/_pod.py``).

A launch that fails prints one line to stderr, ``det-pod: <what failed>; <what to do>``, and
exits with the process runtime's code for it: 127 (entrypoint not found), 126 (found, cannot
run), 1 (anything else: bad spec file, context download, task directory), 2 (usage).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from collections.abc import Mapping
from typing import Any

from . import wire
from .runtime import LaunchError, exec_pod_task, prepare_pod_task

#: The slot types a pod spec may name (``Slot.type``).
SLOT_TYPES = ("cpu", "cuda")
USAGE = "usage: python3 -m det_agent.pod SPEC_JSON"
_PREFIX = "det-pod: "


@dataclasses.dataclass(frozen=True)
class PodSpec:
    """The contents of the spec file: the task spec (wire dict, validated as an agent
    validates a ``start_task``), what an agent would know itself (its id, its slots' types),
    and where the task's ``/run/determined`` is (None: there)."""

    spec: dict[str, Any]
    agent_id: str
    slot_types: dict[int, str]
    run_dir: str | None


def parse_pod_spec(raw: Any) -> PodSpec:
    """The spec file's JSON as a :class:`PodSpec`; ValueError naming the bad key."""
    if not isinstance(raw, dict):
        raise ValueError(f"the spec file must hold a JSON object, got {type(raw).__name__}")
    if "spec" not in raw:
        raise ValueError("the spec file has no 'spec' (the task spec)")
    spec = wire.TaskSpec.from_wire(raw["spec"]).to_wire()
    agent_id = raw.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        raise ValueError(f"'agent_id' must be a non-empty string, got {agent_id!r:.80}")
    types = raw.get("slot_types", {})
    if not isinstance(types, dict):
        raise ValueError(f"'slot_types' must map slot ids to types, got {types!r:.80}")
    slot_types: dict[int, str] = {}
    for key, kind in types.items():
        try:
            slot = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"'slot_types' key {key!r} is not a slot id (an integer)") from None
        if kind not in SLOT_TYPES:
            raise ValueError(f"'slot_types'[{key!r}] is {kind!r}, not one of {', '.join(SLOT_TYPES)}")
        slot_types[slot] = kind
    run_dir = raw.get("run_dir")
    if run_dir is not None and (not isinstance(run_dir, str) or not os.path.isabs(run_dir)):
        raise ValueError(f"'run_dir' must be an absolute path, got {run_dir!r:.80}")
    return PodSpec(spec, agent_id, slot_types, None if run_dir is None else os.path.normpath(run_dir))


def read_pod_spec(path: str) -> PodSpec:
    """Read and parse the spec file; LaunchError saying what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise LaunchError(f"cannot read the spec file {path}: {e.strerror}; the master mounts it "
                          "from the task's Secret (check the pod's volumes)") from e
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise LaunchError(f"the spec file {path} is not JSON ({e}); the master wrote a bad "
                          "Secret, report this as a bug") from e
    try:
        return parse_pod_spec(raw)
    except ValueError as e:
        raise LaunchError(f"invalid task spec in {path}: {e}") from e


def _fail(message: str, code: int) -> int:
    print(_PREFIX + message, file=sys.stderr, flush=True)
    return code


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Prepare and exec the task of the spec file ``argv[0]`` (default: the command line);
    returns, with the exit status, only when that fails."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        return _fail(f"expected one argument, the spec file ({USAGE})", 2)
    try:
        pod = read_pod_spec(args[0])
        launch = prepare_pod_task(
            pod.spec, agent_id=pod.agent_id, slot_types=pod.slot_types, run_dir=pod.run_dir,
            environ=os.environ if environ is None else environ,
        )
        exec_pod_task(launch)
    except LaunchError as e:
        return _fail(str(e), e.exit_code)
    except Exception as e:  # a bug: its traceback, then the one line
        traceback.print_exc()
        return _fail(f"preparing the task failed: {e!r}; report this as a bug", 1)


if __name__ == "__main__":
    sys.exit(main())
