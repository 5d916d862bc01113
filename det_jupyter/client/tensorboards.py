"""TensorBoards: TensorBoard over trials' stored metrics, as a task behind the master's proxy
(``/proxy/{id}/`` on the proxy's own origin).

    tb = launch_tensorboard(session, experiment_ids=[3])
    tb.wait_running()
    print(tb.url)                      # <proxy origin>/proxy/<id>/?det_ticket=<ticket>
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ._errors import InvalidInput
from ._tasks import Notebook, task_link
from .session import Session


class Tensorboard(Notebook):
    """A TensorBoard: its experiments and trials, and the link that opens it."""

    kind = "tensorboards"
    key = "tensorboard"

    @property
    def experiment_ids(self) -> list[int]:
        return [int(e) for e in self._data.get("experimentIds") or []]

    @property
    def trial_ids(self) -> list[int]:
        return [int(t) for t in self._data.get("trialIds") or []]

    @property
    def url(self) -> str:
        """The link that opens TensorBoard in a browser: the ticket becomes a cookie there."""
        if self.ticket is None:
            self.reload()
        return tensorboard_url(self._session.master, self.id, self.ticket, self.proxy_url)


def tensorboard_url(master: str, task_id: str, ticket: str | None, proxy_url: str | None = None) -> str:
    """``<proxy_url>?det_ticket=<ticket>``: ``proxy_url`` is the master's ``proxyUrl`` for the
    task, on the proxy's own origin; without it ``<master>/proxy/<id>/``, which the master
    redirects there."""
    return task_link(proxy_url or f"{master.rstrip('/')}/proxy/{task_id}/", "", ticket)


def launch_tensorboard(session: Session, experiment_ids: Iterable[int] = (),
                       trial_ids: Iterable[int] = (), config: dict[str, Any] | None = None,
                       context: str | os.PathLike | None = None) -> Tensorboard:
    """``POST /api/v1/tensorboards``: TensorBoard over these experiments' and trials' metrics.
    ``config``: a task config (``resources``, ``idle_timeout``, ``description``, …)."""
    from ._client import context_files

    exps, trials = [int(e) for e in experiment_ids], [int(t) for t in trial_ids]
    if not exps and not trials:
        raise InvalidInput("a TensorBoard needs experiment ids or trial ids")
    body = session.post("/api/v1/tensorboards", {
        "experimentIds": exps, "trialIds": trials, "config": dict(config or {}),
        "files": context_files(context, ()) if context else []})
    tb = Tensorboard(session, body["tensorboard"]["id"], body["tensorboard"])
    tb._body = body
    tb.launch_warnings = [str(w) for w in body.get("warnings") or []]
    return tb


def list_tensorboards(session: Session, users: Iterable[str] = ()) -> list[Tensorboard]:
    """TensorBoards you may see (an admin: everyone's), oldest first; ``users`` narrows."""
    wanted = list(users)
    body = session.get("/api/v1/tensorboards", **({"users": wanted} if wanted else {}))
    return [Tensorboard(session, t["id"], t) for t in body.get("tensorboards") or []]
