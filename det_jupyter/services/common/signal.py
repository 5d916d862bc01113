"""A named event with listeners: how the composition root fans one service's news out to
others without either holding the other."""

from __future__ import annotations

from collections.abc import Callable


class Signal:
    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[Callable[[], None]] = []

    def connect(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def fire(self) -> None:
        for listener in list(self._listeners):
            listener()

    def __repr__(self) -> str:
        return f"Signal({self.name!r}, {len(self._listeners)} listeners)"
