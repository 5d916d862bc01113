"""Where a gang goes: all of its slots or none, on one agent or (when it must) on several.

Pure helpers over a view ``{agent_id: free slot ids}``; the caller decides which agents the
view holds (the pool's enabled agents, maybe with slots that are about to be released).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from ._model import Placement

Fitting = Literal["best", "worst"]
FITTINGS: tuple[str, ...] = ("best", "worst")

View = Mapping[str, Sequence[int]]


def check_fitting(fitting: str) -> None:
    if fitting not in FITTINGS:
        raise ValueError(f"fitting_policy must be one of {', '.join(FITTINGS)}, got {fitting!r}")


def fit(
    slots: int, view: View, totals: Mapping[str, int], *, fitting: str, span: bool
) -> tuple[Placement, ...] | None:
    """Place ``slots`` (> 0) on the agents of ``view``, or None when they do not fit.

    One agent when one has room: best fit takes the agent left with the fewest free slots
    (packing, so large gangs find whole agents later), worst fit the one left with the most
    (spreading). With ``span`` a gang may cover several agents: as few as possible, whole
    idle agents first, the last piece chosen by the fitting policy. The lowest slot ids are
    taken, so equal inputs give equal placements.
    """
    single = _single(slots, view, fitting)
    if single is not None or not span:
        return single
    return _spanning(slots, view, totals, fitting)


def _single(slots: int, view: View, fitting: str) -> tuple[Placement, ...] | None:
    room = [a for a in view if len(view[a]) >= slots]
    if not room:
        return None
    sign = 1 if fitting == "best" else -1
    agent = min(room, key=lambda a: (sign * (len(view[a]) - slots), a))
    return (Placement(agent, _lowest(view[agent], slots)),)


def _spanning(
    slots: int, view: View, totals: Mapping[str, int], fitting: str
) -> tuple[Placement, ...] | None:
    # Largest first gives the fewest agents; among equals, agents nobody uses go first.
    order = sorted(
        (a for a in view if view[a]), key=lambda a: (-len(view[a]), len(view[a]) < totals[a], a)
    )
    whole: list[str] = []
    got = 0
    for agent in order:
        if got + len(view[agent]) >= slots:
            break
        whole.append(agent)
        got += len(view[agent])
    else:
        return None
    last = _single(slots - got, {a: view[a] for a in order if a not in whole}, fitting)
    assert last is not None  # the agent the loop stopped at has room for the rest
    pieces = [Placement(a, _lowest(view[a], len(view[a]))) for a in whole]
    return (*pieces, *last)


def _lowest(free: Sequence[int], n: int) -> tuple[int, ...]:
    return tuple(sorted(free)[:n])
