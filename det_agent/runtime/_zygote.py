"""The warm launcher: a Python process that has already started and imported the harness, and
forks a fresh process for each Python task instead of starting an interpreter.

Run by the agent as a script with its own interpreter; it imports only the standard library and
``det_harness``, because everything it imports is already in every task it forks. It talks to
the agent over a SOCK_SEQPACKET socket (fd number in DET_LAUNCHER_FD), one JSON message per
packet:

- agent → launcher: ``{"id", "argv", "cwd", "env", "isolate"}`` with the task's stdout and
  stderr pipe ends attached (SCM_RIGHTS). ``argv`` is ``[script, *args]`` or
  ``["-m", module, *args]``; ``isolate`` is None or ``{"steps", "uid", "gid", "switch"}``: the
  mount steps of ``_isolation.mount_plan`` and the identity to become.
- launcher → agent: ``{"id", "pid"}`` once the task's process exists (``"error"`` instead when
  the fork failed), then ``{"id", "status"}`` (a wait status) when it exits.

Each task process calls setsid (its pid is its process group, which the agent kills), asks for
SIGKILL when the launcher dies, and with ``isolate`` enters new mount and pid namespaces like
``unshare --mount --pid --fork --mount-proc``: a middle process waits while the task runs as
pid 1 of its namespace, so everything it leaves behind dies with it. It then drops to the
task's uid/gid with no supplementary groups, no capabilities and no_new_privs, as the cold
path's ``setpriv`` does.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading

import det_harness

det_harness.preload()  # the point of the launcher: every task starts with the harness loaded

_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_MOVE = 8192
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_MASK_OPTIONS = "mode=0755,size=64k"
_MAX_PACKET = 1 << 20

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def _run_steps(steps: list[list[str]]) -> None:
    """The mount steps of ``_isolation.mount_plan`` (the cold path runs them as shell lines)."""
    for op, *args in steps:
        if op == "bind":
            _mount(args[0], args[1], None, _MS_BIND | _MS_REC)
        elif op == "tmpfs":
            _mount("det-hidden", args[0], "tmpfs", _MS_NOSUID | _MS_NODEV, _MASK_OPTIONS)
        elif op == "mkdir":
            os.makedirs(args[0], exist_ok=True)
        elif op == "move":
            _mount(args[0], args[1], None, _MS_MOVE)
        elif op == "rmdir":
            os.rmdir(args[0])
        else:
            raise OSError(f"unknown mount step {op!r}")


def _become(isolate: dict) -> None:
    """Drop to the task's identity: its uid/gid with no supplementary groups, no capabilities
    (bounding set emptied) and no way to gain any (no_new_privs)."""
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    if isolate.get("switch"):
        os.setgroups([])
        os.setresgid(isolate["gid"], isolate["gid"], isolate["gid"])
        os.setresuid(isolate["uid"], isolate["uid"], isolate["uid"])
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def _die_with_parent(parent: int) -> None:
    """Ask for SIGKILL when ``parent`` (the pid that forked us, taken before the fork: read
    after it, it may already be the reaper's) dies; leave now if it already has."""
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(137)


def _isolate(isolate: dict) -> None:
    """New mount and pid namespaces with the task's binds; returns in the namespace's pid 1."""
    _check(_libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID), "unshare")
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)
    _run_steps(isolate.get("steps") or [])
    # As pid 1 of the new namespace the task sees a parent pid of 0 whether or not the middle
    # process lives, so _die_with_parent's check cannot tell; a pipe whose only writer is the
    # middle process can (it reads as ended once that process is gone).
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid:  # the middle process: mirror the task's exit
        os.close(alive_r)
        _, status = os.waitpid(pid, 0)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
    os.close(alive_w)
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if select.select([alive_r], [], [], 0)[0]:  # the middle process died before prctl
        os._exit(137)
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _become(isolate)
    # A change of uid clears the parent-death signal: ask again, and look again.
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if select.select([alive_r], [], [], 0)[0]:
        os._exit(137)
    os.close(alive_r)


def _become_task(job: dict, out_fd: int, err_fd: int, launcher: int) -> None:
    """In the forked child of ``launcher``: take on the task's process state, then return to
    run it."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    _die_with_parent(launcher)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in (null, out_fd, err_fd):
        os.close(fd)
    if job.get("isolate"):
        _isolate(job["isolate"])
    os.chdir(job["cwd"])
    known = set(sys.path)
    env = job["env"]
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in known]
    argv = job["argv"]
    first = os.getcwd() if argv[0] == "-m" else os.path.dirname(os.path.abspath(argv[0]))
    sys.path[:] = [first, *extra, *sys.path[1:]]
    if env.get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]


def _serve(sock: socket.socket) -> dict:
    """Fork a task per request and report exits; returns only in a forked task process."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    tasks: dict[int, str] = {}
    launcher = os.getpid()
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _reap(sock, tasks)
        if sock not in ready:
            continue
        data, fds, _, _ = socket.recv_fds(sock, _MAX_PACKET, 2)
        if not data:
            sys.exit(0)  # the agent is gone
        job = json.loads(data)
        try:
            pid = os.fork()
        except OSError as e:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"id": job["id"], "error": str(e)}).encode())
            continue
        if pid == 0:
            sock.close()
            os.close(wake_r)
            os.close(wake_w)
            _become_task(job, fds[0], fds[1], launcher)
            return job
        for fd in fds:
            os.close(fd)
        tasks[pid] = job["id"]
        sock.send(json.dumps({"id": job["id"], "pid": pid}).encode())


def _reap(sock: socket.socket, tasks: dict[int, str]) -> None:
    while tasks:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        job_id = tasks.pop(pid, None)
        if job_id is not None:
            sock.send(json.dumps({"id": job_id, "status": status}).encode())


def _run(argv: list[str]) -> int:
    """Run the task's script or module as ``__main__``; its exit code, as the interpreter's."""
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def _exit(code: int) -> None:
    """Leave as the interpreter would — non-daemon threads joined, atexit run, output flushed —
    but without tearing every module down, which costs a warm task more than its start."""
    main = threading.main_thread()
    for t in threading.enumerate():
        if t is not main and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)


def main() -> None:
    sock = socket.socket(fileno=int(os.environ.pop("DET_LAUNCHER_FD")))
    job = _serve(sock)
    _exit(_run(job["argv"]))


if __name__ == "__main__":
    main()
