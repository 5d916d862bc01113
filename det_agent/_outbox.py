"""A bounded queue of frames for the master, each kept until the master acknowledges it."""

from __future__ import annotations

import collections
import logging
from typing import Any

log = logging.getLogger(__name__)

#: Frames held while the master is unreachable; about 1,000 lines each for log frames.
MAX_FRAMES = 5000


class Outbox:
    """FIFO of frames, numbered by ``put`` (the frame's ``id``, counting from 1).

    A frame goes out (``peek``, then ``sent``) and stays until the master acknowledges it:
    ``ack(n)`` drops every frame up to id ``n`` (the master handles frames in order and acks
    each one once it is stored). After a reconnect ``rewind`` makes every unacknowledged frame
    go out again: a frame written into a socket whose master then died is not lost (the master
    drops log lines it already stored by their ``seq``).

    When full, the oldest ``logs`` frame is dropped first: log frames are what piles up during
    an outage and the only frames the master can live without (it sees a gap in ``seq``);
    ``task_started``/``task_exited`` carry task state, so they are dropped only when nothing
    else is left to drop.
    """

    def __init__(self, max_frames: int = MAX_FRAMES) -> None:
        if max_frames < 1:
            raise ValueError(f"max_frames must be at least 1, got {max_frames}")
        self._max = max_frames
        self._frames: collections.deque[dict[str, Any]] = collections.deque()
        self._sent = 0  # how many frames at the head went out in this session
        self._next_id = 1
        self.dropped = 0

    def __len__(self) -> int:
        """Frames not acknowledged yet, sent or not."""
        return len(self._frames)

    def put(self, frame: dict[str, Any]) -> None:
        """Number ``frame`` (its ``id``) and append it, making room if the outbox is full."""
        if len(self._frames) >= self._max:
            self._drop_one()
        frame["id"] = self._next_id
        self._next_id += 1
        self._frames.append(frame)

    def peek(self) -> dict[str, Any] | None:
        """The oldest frame not sent in this session, or None."""
        return self._frames[self._sent] if self._sent < len(self._frames) else None

    def sent(self, frame: dict[str, Any]) -> None:
        """``frame`` (the one ``peek`` gave) was written; keep it until it is acknowledged
        (unless it was dropped or acknowledged meanwhile)."""
        if self._sent < len(self._frames) and self._frames[self._sent] is frame:
            self._sent += 1

    def ack(self, upto: int) -> None:
        """The master stored every frame up to id ``upto``."""
        while self._frames and self._frames[0]["id"] <= upto:
            self._frames.popleft()
            self._sent = max(0, self._sent - 1)

    def rewind(self) -> None:
        """A new session: every frame not acknowledged goes out again, oldest first."""
        self._sent = 0

    def unacknowledged_exits(self) -> list[str]:
        """Allocations whose ``task_exited`` the master has not acknowledged: a ``hello`` lists
        them as running, so the master waits for their exit instead of failing them."""
        return [str(f.get("allocation_id")) for f in self._frames if f.get("type") == "task_exited"]

    def _drop_one(self) -> None:
        for i, frame in enumerate(self._frames):
            if frame.get("type") == "logs":
                del self._frames[i]
                break
        else:
            i = 0
            self._frames.popleft()
        if i < self._sent:
            self._sent -= 1
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 1000 == 0:
            log.warning(
                "the master has been unreachable long enough that %d frames were dropped "
                "(outbox holds %d)",
                self.dropped,
                self._max,
            )
