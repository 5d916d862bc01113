"""``python -m det_harness.launch.wrap_rank RANK [--] CMD ARGS...``: run CMD, prefixing each line
it writes to stdout or stderr with ``[rank=N] `` (the agent turns the prefix into the log line's
rank, so the UI can filter by rank).

RANK is an integer, or names of environment variables tried in order (``RANK`` or
``RANK,OMPI_COMM_WORLD_RANK``). A line ends at ``\\n``, ``\\r`` (progress bars) or ``\\r\\n``; a
line longer than 8 KiB is cut into pieces. Signals to the wrapper are passed on to CMD, and CMD
is killed if the wrapper dies. The wrapper exits with CMD's exit code (128 + N for signal N).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence

from ._proc import STATUS_DIR_ENV, die_with_parent, exit_code, forward_signals, write_status

LINE_LIMIT = 8192
_END = re.compile(rb"\r\n|\r|\n")
_USAGE = "usage: python -m det_harness.launch.wrap_rank RANK [--] CMD ARGS..."


def resolve_rank(spec: str, environ: Mapping[str, str]) -> int:
    """An integer RANK, or the first of the named environment variables that is set."""
    if spec.isdigit():
        return int(spec)
    for name in spec.split(","):
        raw = environ.get(name)
        if raw is not None:
            if not raw.isdigit():
                raise ValueError(f"environment variable {name}={raw!r} is not a rank")
            return int(raw)
    raise ValueError(f"rank {spec!r} is neither an integer nor a set environment variable")


def split_lines(buf: bytes, limit: int = LINE_LIMIT) -> tuple[list[bytes], bytes]:
    """Cut the complete lines (without their endings) off ``buf``; return them and the rest.

    A trailing ``\\r`` stays in the rest, since a ``\\n`` may follow in the next read.
    """
    lines: list[bytes] = []
    start = 0
    for m in _END.finditer(buf):
        if m.group() == b"\r" and m.end() == len(buf):
            break
        lines.append(buf[start:m.start()])
        start = m.end()
    rest = buf[start:]
    while len(rest) >= limit:
        lines.append(rest[:limit])
        rest = rest[limit:]
    return lines, rest


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def pump(src: int, dst: int, prefix: bytes) -> None:
    """Copy ``src`` to ``dst`` line by line with ``prefix`` until EOF."""
    rest = b""
    while True:
        chunk = os.read(src, 65536)
        if not chunk:
            break
        lines, rest = split_lines(rest + chunk)
        if lines:
            _write_all(dst, b"".join(prefix + line + b"\n" for line in lines))
    if rest:
        _write_all(dst, prefix + rest.rstrip(b"\r") + b"\n")


def run(rank: int, cmd: Sequence[str]) -> int:
    """Run ``cmd`` with its output prefixed by ``[rank=<rank>] ``; return its exit code."""
    prefix = f"[rank={rank}] ".encode()
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                bufsize=0, preexec_fn=lambda: die_with_parent(signal.SIGKILL))
    except OSError as exc:
        _write_all(2, prefix + f"det_harness: cannot run {cmd[0]!r}: {exc}\n".encode())
        return 127
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [threading.Thread(target=pump, args=(proc.stdout.fileno(), 1, prefix), daemon=True),
             threading.Thread(target=pump, args=(proc.stderr.fileno(), 2, prefix), daemon=True)]
    with forward_signals(proc):
        for t in pumps:
            t.start()
        code = exit_code(proc.wait())
        for t in pumps:
            t.join(timeout=5.0)  # a process CMD left behind may hold the pipes open
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse ``RANK [--] CMD ARGS...``, run, record the exit code, return it."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 2 and args[1] == "--":
        args = [args[0], *args[2:]]
    if len(args) < 2:
        print(_USAGE, file=sys.stderr)
        return 2
    try:
        rank = resolve_rank(args[0], os.environ)
    except ValueError as exc:
        print(f"det_harness.launch.wrap_rank: {exc}", file=sys.stderr)
        return 2
    die_with_parent(signal.SIGTERM)  # torchrun gone: stop the command gracefully
    code = run(rank, args[1:])
    status_dir = os.environ.get(STATUS_DIR_ENV)
    if status_dir:
        try:
            write_status(status_dir, rank, code)
        except OSError:
            pass  # only the launcher's choice of exit code depends on it
    return code


if __name__ == "__main__":
    sys.exit(main())
