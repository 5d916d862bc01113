"""The SSH server a shell task runs: ``python3 -m det_jupyter.tasks.sshd --host H --port P``.

It accepts one client key only, the shell's public key that the master generated at launch
(``DET_SHELL_AUTHORIZED_KEY``); no passwords, no other keys. Its host key is made fresh at
every start (clients reach it through the master's tunnel with ``StrictHostKeyChecking=no``).
Sessions run as the task's OS user, in the task's working directory, with the task's
environment: a login-free shell on a PTY when the client asks for one (``ssh``), the
client's command otherwise (``ssh host cmd``), SFTP/SCP, and local port forwarding
(``ssh -L``: connections made from the task, which its owner can make anyway). Remote
forwarding, agent and X11 forwarding are refused.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import logging
import os
import pwd
import shutil
import signal
import struct
import sys
import termios
from typing import Any

import asyncssh

log = logging.getLogger("det_jupyter.sshd")

KEY_ENV = "DET_SHELL_AUTHORIZED_KEY"
_CHUNK = 65536


def login_shell() -> str:
    """The task user's shell from the password database, else ``/bin/sh``."""
    try:
        shell = pwd.getpwuid(os.getuid()).pw_shell
    except KeyError:
        shell = ""
    return shell if shell and os.access(shell, os.X_OK) and not shell.endswith(("nologin", "false")) \
        else (shutil.which("bash") or "/bin/sh")


def session_env(base: dict[str, str], client_env: dict[str, str], term: str | None,
                shell: str) -> dict[str, str]:
    """The task's environment, what the client sent (``SendEnv``), and the usual login
    variables where the task has none. The authorized key stays out of it."""
    env = {k: v for k, v in base.items() if k != KEY_ENV}
    env.update({str(k): str(v) for k, v in client_env.items()})
    try:
        pw = pwd.getpwuid(os.getuid())
        env.setdefault("USER", pw.pw_name)
        env.setdefault("LOGNAME", pw.pw_name)
        env.setdefault("HOME", pw.pw_dir)
    except KeyError:
        pass
    env.setdefault("SHELL", shell)
    if term:
        env["TERM"] = term
    return env


def _set_winsize(fd: int, size: tuple[int, int, int, int]) -> None:
    width, height, pixwidth, pixheight = size
    if width and height:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, pixwidth, pixheight))


def _make_controlling_tty() -> None:  # runs in the child, after setsid and the dup2s
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Session:
    """One SSH session: a child process wired to the channel through a PTY or pipes."""

    def __init__(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        self.process = process
        self.shell = login_shell()
        self.pty = process.get_terminal_type() is not None

    def argv(self) -> list[str]:
        command = self.process.command
        if command:
            return [self.shell, "-c", command]
        return [self.shell]

    async def run(self) -> None:
        env = session_env(dict(os.environ), dict(self.process.env),
                          self.process.get_terminal_type(), self.shell)
        try:
            code = await (self._run_pty(env) if self.pty else self._run_pipes(env))
        except OSError as exc:
            self.process.stderr.write(f"det shell: cannot start {self.shell}: {exc}\r\n".encode())
            code = 127
        self.process.exit(code)

    async def _run_pipes(self, env: dict[str, str]) -> int:
        proc = await asyncio.create_subprocess_exec(
            *self.argv(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True)
        assert proc.stdin and proc.stdout and proc.stderr

        async def feed() -> None:
            try:
                while True:
                    try:
                        data = await self.process.stdin.read(_CHUNK)
                    except asyncssh.SignalReceived as exc:
                        _signal(proc.pid, exc.signal)
                        continue
                    except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged):
                        continue
                    if not data:
                        break
                    proc.stdin.write(data)
                    await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                proc.stdin.close()

        feeder = asyncio.ensure_future(feed())
        await asyncio.gather(_copy(proc.stdout, self.process.stdout),
                             _copy(proc.stderr, self.process.stderr))
        code = await proc.wait()
        feeder.cancel()
        return code

    async def _run_pty(self, env: dict[str, str]) -> int:
        master, slave = os.openpty()
        _set_winsize(master, self.process.get_terminal_size())
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv(), stdin=slave, stdout=slave, stderr=slave, env=env,
                start_new_session=True, preexec_fn=_make_controlling_tty)
        finally:
            os.close(slave)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                     os.fdopen(master, "rb", 0))
        out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(os.dup(master), "wb", 0))

        async def feed() -> None:
            while True:
                try:
                    data = await self.process.stdin.read(_CHUNK)
                except asyncssh.TerminalSizeChanged as exc:
                    _set_winsize(master, exc.term_size)
                    continue
                except asyncssh.BreakReceived:
                    data = b"\x03"
                except asyncssh.SignalReceived as exc:
                    _signal(proc.pid, exc.signal)
                    continue
                if not data:
                    out.write(b"\x04")  # EOF on the channel: ^D to the terminal
                    return
                out.write(data)

        feeder = asyncio.ensure_future(feed())
        await _copy(reader, self.process.stdout)  # until the terminal's last byte (EIO)
        code = await proc.wait()
        feeder.cancel()
        out.close()
        return code


async def _copy(source: asyncio.StreamReader, sink: Any) -> None:
    while True:
        try:
            data = await source.read(_CHUNK)
        except OSError:  # EIO: the PTY's last process closed it
            return
        if not data:
            return
        sink.write(data)
        await sink.drain()


def _signal(pid: int, name: str) -> None:
    sig = getattr(signal, f"SIG{name}", None)
    if isinstance(sig, signal.Signals):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass


async def _handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
    try:
        await Session(process).run()
    except (asyncssh.Error, ConnectionError, OSError) as exc:
        log.info("session ended: %s", exc)
        process.close()


class _Server(asyncssh.SSHServer):
    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str,
                             orig_port: int) -> bool:
        return True  # ssh -L: asyncssh connects to dest from the task


async def serve(host: str, port: int, authorized_key: str) -> asyncssh.SSHAcceptor:
    """Listen on ``host:port``; only ``authorized_key`` (one OpenSSH public key line) gets in."""
    return await asyncssh.create_server(
        _Server, host, port,
        server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")],
        authorized_client_keys=asyncssh.import_authorized_keys(authorized_key.strip() + "\n"),
        process_factory=_handle, encoding=None, sftp_factory=True, allow_scp=True,
        agent_forwarding=False, x11_forwarding=False, line_editor=False, keepalive_interval=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m det_jupyter.tasks.sshd")
    parser.add_argument("--host", required=True, help="the address to listen on")
    parser.add_argument("--port", type=int, required=True, help="the TCP port to listen on")
    args = parser.parse_args(argv)
    key = os.environ.get(KEY_ENV, "")
    if not key.strip():
        print(f"sshd: {KEY_ENV} is empty: no client key to accept", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="sshd: %(message)s")
    logging.getLogger("asyncssh").setLevel(logging.WARNING)

    async def run() -> None:
        try:
            await serve(args.host, args.port, key)
        except OSError as exc:  # the port is another program's: say so, in one line
            raise SystemExit(f"sshd: cannot listen on {args.host}:{args.port}: "
                             f"{exc.strerror or exc}") from None
        print(f"sshd: listening on {args.host}:{args.port} in {os.getcwd()}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
