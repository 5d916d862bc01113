"""Harness collectives: lockstep rounds over plain sockets between a group's ranks and its chief.

Not a replacement for ``torch.distributed``: these move small picklable Python objects
(preemption answers, checkpoint ids, metadata) so that the Core API can agree across ranks.

Wire format. Every frame is an 8-byte big-endian length followed by that many bytes. A worker
connects to the chief (rank 0 of the group), which sends a 16-byte random nonce; the worker
answers with a JSON hello ``{"rank": r, "size": n, "auth": hmac(secret, "worker" + nonce)}``
and the chief with ``{"auth": hmac(secret, "chief" + nonce)}`` (or ``{"error": "..."}``), so each
side proves it knows the allocation's secret before anything is unpickled. Then each collective
is one round: every worker sends the pickle of ``(seq, op, value)``; the chief waits for all of
them, checks that every rank is in the same round doing the same op, and answers each worker
with the pickle of ``("ok", answer)`` or ``("error", message)``.

Every wait has a deadline, and a rank that dies closes its socket, so a collective never hangs
forever: it raises :class:`CollectiveError` naming the rank and what to do.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import pickle
import selectors
import socket
import struct
import threading
import time
from typing import Any, NoReturn

logger = logging.getLogger("det_harness")

_LEN = struct.Struct(">Q")
_HANDSHAKE_MAX = 4096  # bytes: a hello larger than this is not one of ours
_HANDSHAKE_TIMEOUT = 10.0  # seconds a connected peer has to complete the hello

OPS = ("allgather", "gather", "broadcast")

#: ``(host, port)`` for TCP, or a ``str`` naming a Unix socket ("\0..." is Linux's abstract one).
Address = tuple[str, int] | str


class CollectiveError(RuntimeError):
    """A collective could not complete: a rank died, timed out, or called another collective."""


def send_frame(sock: socket.socket, data: bytes) -> None:
    """Send one length-prefixed frame."""
    if len(data) < 65536:
        sock.sendall(_LEN.pack(len(data)) + data)  # one segment for the small, common case
    else:
        sock.sendall(_LEN.pack(len(data)))
        sock.sendall(data)


def recv_frame(sock: socket.socket, max_len: int | None = None) -> bytes:
    """Receive one length-prefixed frame; ConnectionError on EOF or a frame over ``max_len``."""
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if max_len is not None and n > max_len:
        raise ConnectionError(f"frame of {n} bytes is over the limit of {max_len}")
    return _recv_exact(sock, n)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("the peer closed the connection")
        got += k
    return bytes(buf)


def _mac(secret: str, role: bytes, nonce: bytes) -> str:
    return hmac.new(secret.encode(), role + nonce, hashlib.sha256).hexdigest()


def _describe(address: Address) -> str:
    if isinstance(address, tuple):
        return f"{address[0]}:{address[1]}"
    return f"unix socket {address.lstrip(chr(0))!r}"


def _listen(address: Address) -> socket.socket:
    if isinstance(address, tuple):
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if host in ("127.0.0.1", "localhost", "::1"):
            return socket.create_server((host, port), family=family)  # one container: loopback
        # Any interface: the other containers reach the chief by the address the master gave.
        return socket.create_server(("", port), family=family,
                                    dualstack_ipv6=family == socket.AF_INET6)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if not address.startswith("\0"):
        try:
            os.unlink(address)  # a stale socket file from a process that died
        except FileNotFoundError:
            pass
    sock.bind(address)
    sock.listen()
    return sock


def _nodelay(sock: socket.socket) -> socket.socket:
    # A round is request/answer; Nagle would hold a frame's second segment for an ACK.
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _connect(address: Address, timeout: float) -> socket.socket:
    if isinstance(address, tuple):
        return _nodelay(socket.create_connection(address, timeout=timeout))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
    except OSError:
        sock.close()
        raise
    return sock


class Group:
    """The ranks ``0..size-1`` of one collective group; rank 0 is its chief (the server).

    Sockets are opened on the first round. Rounds must be made in the same order on every rank;
    they are serialised by a lock, so calling from several threads is safe but not concurrent.
    """

    def __init__(self, rank: int, size: int, address: Address, *, secret: str, timeout: float,
                 name: str = "world") -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} must be in [0, size={size})")
        if not timeout > 0:
            raise ValueError(f"timeout {timeout} must be more than 0 seconds")
        self.rank = rank
        self.size = size
        self.address = address
        self.name = name
        self._secret = secret
        self._timeout = timeout
        self._lock = threading.Lock()
        self._seq = 0
        self._broken: str | None = None
        self._opened = False
        self._listener: socket.socket | None = None
        self._conns: dict[int, socket.socket] = {}  # chief: worker rank -> socket
        self._selector: selectors.BaseSelector | None = None  # chief: waits on all workers
        self._chief: socket.socket | None = None  # worker: its socket to the chief

    # -- public -------------------------------------------------------------------------------

    def exchange(self, op: str, value: Any) -> Any:
        """One round of ``op``: the chief gets everyone's values (a list in rank order); workers
        get the list for "allgather", the chief's value for "broadcast", None for "gather"."""
        if op not in OPS:
            raise ValueError(f"op {op!r} must be one of {OPS}")
        if self.size == 1:
            return value if op == "broadcast" else [value]
        with self._lock:
            if self._broken is not None:
                raise CollectiveError(self._broken)
            if not self._opened:
                self._open(op)
            return self._chief_round(op, value) if self.rank == 0 else self._worker_round(op, value)

    def close(self) -> None:
        """Close the sockets (idempotent). A later round raises CollectiveError."""
        if self._broken is None:
            self._broken = f"the {self.name} collective group was closed on rank {self.rank}"
        self._close_sockets()

    # -- connection set-up --------------------------------------------------------------------

    def _open(self, op: str) -> None:
        self._opened = True
        deadline = time.monotonic() + self._timeout
        if self.rank == 0:
            self._accept_all(op, deadline)
        else:
            self._connect_to_chief(op, deadline)

    def _accept_all(self, op: str, deadline: float) -> None:
        where = _describe(self.address)
        refused = 0
        try:
            listener = self._listener = _listen(self.address)
        except OSError as exc:
            self._fail(f"the chief could not listen on {where} for the harness collectives "
                       f"({exc}); the port must be free (DET_COLLECTIVE_PORT)")
        while len(self._conns) < self.size - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = [r for r in range(1, self.size) if r not in self._conns]
                self._fail(f"rank(s) {missing} did not connect to the chief at {where} within "
                           f"{self._timeout:g} s for {op} #{self._seq}: every rank must make the "
                           "same collective calls (e.g. should_preempt()); check that they run "
                           "and can reach the chief (set DET_COLLECTIVE_TIMEOUT to wait longer)")
            listener.settimeout(remaining)
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(min(remaining, _HANDSHAKE_TIMEOUT))
            try:
                rank = self._greet(_nodelay(conn))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log = logger.debug if refused else logger.warning  # once: a peer may retry
                log("det_harness: refused a collective connection on %s: %s", where, exc)
                refused += 1
                conn.close()
                continue
            self._conns[rank] = conn
        listener.close()  # everyone is here: a late stray connection is refused
        self._listener = None
        self._selector = selectors.DefaultSelector()
        for rank, conn in self._conns.items():
            self._selector.register(conn, selectors.EVENT_READ, rank)

    def _greet(self, conn: socket.socket) -> int:
        nonce = os.urandom(16)
        send_frame(conn, nonce)
        hello = json.loads(recv_frame(conn, _HANDSHAKE_MAX))
        rank, size = hello["rank"], hello["size"]
        error = None
        if not hmac.compare_digest(str(hello["auth"]), _mac(self._secret, b"worker", nonce)):
            error = (f"wrong key from a process claiming rank {rank!r}: it is not a rank of this "
                     "trial (DET_SESSION_TOKEN differs)")
        elif size != self.size:
            error = f"rank {rank} thinks the {self.name} group has {size} ranks, the chief {self.size}"
        elif not isinstance(rank, int) or not 0 < rank < self.size:
            error = f"rank {rank!r} is not a worker rank of a group of {self.size}"
        elif rank in self._conns:
            error = f"rank {rank} connected twice: two processes have the same rank"
        if error is not None:
            send_frame(conn, json.dumps({"error": error}).encode())
            raise ValueError(error)
        send_frame(conn, json.dumps({"auth": _mac(self._secret, b"chief", nonce)}).encode())
        conn.settimeout(None)
        return rank

    def _connect_to_chief(self, op: str, deadline: float) -> None:
        where = _describe(self.address)
        delay = 0.02
        last: Exception | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(f"rank {self.rank} could not connect to the chief (rank 0) at {where} "
                           f"within {self._timeout:g} s for {op} #{self._seq} (last error: "
                           f"{last}): is rank 0 running and making the same collective calls?")
            try:
                sock = _connect(self.address, min(remaining, _HANDSHAKE_TIMEOUT))
                self._chief = sock
                self._hello(sock)
                return
            except CollectiveError:
                raise
            except (OSError, ValueError, KeyError, TypeError) as exc:
                last = exc
                if self._chief is not None:
                    self._chief.close()
                    self._chief = None
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.5)

    def _hello(self, sock: socket.socket) -> None:
        nonce = recv_frame(sock, _HANDSHAKE_MAX)
        hello = {"rank": self.rank, "size": self.size,
                 "auth": _mac(self._secret, b"worker", nonce)}
        send_frame(sock, json.dumps(hello).encode())
        answer = json.loads(recv_frame(sock, _HANDSHAKE_MAX))
        if "error" in answer:
            self._fail(f"rank {self.rank}: the chief refused the connection: {answer['error']}")
        if not hmac.compare_digest(str(answer.get("auth")), _mac(self._secret, b"chief", nonce)):
            self._fail(f"rank {self.rank}: {_describe(self.address)} answered without this "
                       "trial's key: another program is using the collective port")
        sock.settimeout(None)

    # -- rounds -------------------------------------------------------------------------------

    def _chief_round(self, op: str, value: Any) -> list:
        seq = self._seq
        got: dict[int, Any] = {0: value}
        deadline = time.monotonic() + self._timeout
        while len(got) < self.size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = [r for r in range(self.size) if r not in got]
                self._fail(f"rank(s) {missing} did not reach {op} #{seq} within "
                           f"{self._timeout:g} s: a rank is stuck, or skipped a collective call "
                           "that the others made; every rank must call the same collectives in "
                           "the same order (set DET_COLLECTIVE_TIMEOUT to wait longer)")
            assert self._selector is not None
            for key, _ in self._selector.select(remaining):
                got[key.data] = self._read_worker(key.data, op, seq, remaining)
        values = [got[r] for r in range(self.size)]
        answer = values if op == "allgather" else value if op == "broadcast" else None
        try:
            data = pickle.dumps(("ok", answer), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            self._fail(f"the chief could not pickle its {op} #{seq} value: {exc}")
        for rank, conn in self._conns.items():
            try:
                conn.settimeout(self._timeout)
                send_frame(conn, data)
            except OSError as exc:
                self._fail(self._lost(rank, op, seq, exc))
        self._seq += 1
        return values

    def _read_worker(self, rank: int, op: str, seq: int, remaining: float) -> Any:
        conn = self._conns[rank]
        try:
            conn.settimeout(remaining)
            frame = recv_frame(conn)
        except OSError as exc:  # ConnectionError and TimeoutError are OSErrors
            self._fail(self._lost(rank, op, seq, exc))
        try:
            wseq, wop, wvalue = pickle.loads(frame)
        except Exception as exc:
            self._fail(f"the chief could not unpickle rank {rank}'s {op} #{seq} value: {exc}")
        if wop == "error":
            self._fail(str(wvalue))
        if (wseq, wop) != (seq, op):
            self._fail(f"rank {rank} called {wop} #{wseq} while the chief called {op} #{seq}: "
                       "every rank must call the same collectives in the same order")
        return wvalue

    def _lost(self, rank: int, op: str, seq: int, exc: BaseException) -> str:
        return (f"lost rank {rank} during {op} #{seq} ({exc}): it exited or crashed; "
                f"see its output (lines prefixed [rank={rank}])")

    def _worker_round(self, op: str, value: Any) -> Any:
        seq = self._seq
        sock = self._chief
        assert sock is not None
        try:
            data = pickle.dumps((seq, op, value), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            message = f"rank {self.rank} could not pickle its {op} #{seq} value: {exc}"
            data = pickle.dumps((seq, "error", message))
            try:
                send_frame(sock, data)  # so the other ranks fail now rather than time out
            except OSError:
                pass
            self._fail(message)
        try:
            sock.settimeout(self._timeout)
            try:
                send_frame(sock, data)
            except OSError:
                # The chief may have failed the round already and closed: read why, if it said.
                sock.settimeout(1.0)
            status, answer = pickle.loads(recv_frame(sock))
        except TimeoutError:
            self._fail(f"rank {self.rank} got no answer from the chief (rank 0) to {op} #{seq} "
                       f"within {self._timeout:g} s: a rank is stuck, or skipped a collective "
                       "call that the others made (set DET_COLLECTIVE_TIMEOUT to wait longer)")
        except OSError as exc:
            self._fail(f"rank {self.rank} lost the chief (rank 0) during {op} #{seq} ({exc}): it "
                       "exited or crashed; see its output (lines prefixed [rank=0])")
        if status == "error":
            self._fail(f"rank {self.rank}: {answer}")
        self._seq += 1
        return answer

    # -- failure ------------------------------------------------------------------------------

    def _fail(self, message: str) -> NoReturn:
        """Tell the connected workers (chief), close everything and raise: the group is done."""
        self._broken = message
        if self.rank == 0:
            data = pickle.dumps(("error", message))
            for conn in self._conns.values():
                try:
                    conn.settimeout(1.0)
                    send_frame(conn, data)
                except OSError:
                    pass
        self._close_sockets()
        raise CollectiveError(message)

    def _close_sockets(self) -> None:
        for conn in [*self._conns.values(), self._chief, self._listener]:
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        self._conns = {}
        self._chief = None
        self._listener = None
        if self._selector is not None:
            self._selector.close()
            self._selector = None
