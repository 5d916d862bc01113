"""Stage timer for a master a benchmark starts (a profiling aid, not part of the product).

Put this directory first on ``PYTHONPATH`` and name the functions to time in
``DET_PROF_STAGES`` (``module:function`` or ``module:Class.method``, comma-separated); every
``det_jupyter.cli.up`` process started with that environment (the benchmarks' masters) then
records, for each call of each, when it began and how long it took (``time.perf_counter``,
CLOCK_MONOTONIC: comparable with the benchmark's own clock), and writes them as JSON to
``DET_PROF_OUT`` (default ``stages.json`` in the working directory; ``{pid}`` in it is replaced by
the process id, for a benchmark that starts more than one master) when it exits::

    DET_PROF_STAGES=det_jupyter.server_ext._notebooks:kill_proxied,tornado.web:RequestHandler._execute \\
        PYTHONPATH=bench/stages .venv/bin/python bench/bm6_proxy.py --smoke

Other processes (the agent, the benchmark itself) are left alone. A function is replaced on its
module or class only: a module that imported it by name before keeps the untimed one.
"""

from __future__ import annotations

import os
import sys

_SPEC = os.environ.get("DET_PROF_STAGES", "")


def _install(spec: str) -> None:
    import atexit
    import functools
    import importlib
    import inspect
    import json
    import signal
    import time

    calls: dict[str, list[tuple[float, float]]] = {}

    def wrap(name: str) -> None:
        module, _, attr = name.partition(":")
        owner: object = importlib.import_module(module)
        *path, last = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        fn = getattr(owner, last)
        seen = calls.setdefault(name, [])
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def timed(*args: object, **kwargs: object) -> object:
                began = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    seen.append((began, time.perf_counter() - began))
        else:
            @functools.wraps(fn)
            def timed(*args: object, **kwargs: object) -> object:  # type: ignore[misc]
                began = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    seen.append((began, time.perf_counter() - began))
        setattr(owner, last, timed)

    for name in filter(None, (s.strip() for s in spec.split(","))):
        wrap(name)

    def dump() -> None:
        out = os.environ.get("DET_PROF_OUT", "stages.json").replace("{pid}", str(os.getpid()))
        with open(out, "w") as f:
            json.dump(calls, f)

    atexit.register(dump)
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: object) -> None:
        dump()
        if callable(previous):
            previous(signum, frame)
        else:
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)


if _SPEC and "det_jupyter.cli.up" in getattr(sys, "orig_argv", []):
    _install(_SPEC)
