"""A dependency that closes a construction cycle.

The composition root builds every service with its dependencies as constructor arguments.
Where two services need each other (the allocation service and the resource manager that
launches its allocations; experiments and their trials), one side takes a ``Late`` made
empty, and the root binds it once, right after the other side is built and before anything
runs. A ``Late`` used before it is bound, or bound twice, is a wiring bug and says so.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Late(Generic[T]):
    def __init__(self, what: str) -> None:
        self._what = what
        self._value: T | None = None

    def bind(self, value: T) -> None:
        if self._value is not None:
            raise RuntimeError(f"{self._what} is already bound")
        self._value = value

    @property
    def bound(self) -> bool:
        return self._value is not None

    def get(self) -> T:
        if self._value is None:
            raise RuntimeError(f"{self._what} was used before the composition root bound it")
        return self._value

    @classmethod
    def of(cls, what: str, value: T) -> Late[T]:
        """A ``Late`` bound at once (tests and single-service setups)."""
        late: Late[T] = cls(what)
        late.bind(value)
        return late
