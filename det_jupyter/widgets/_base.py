"""What every live widget shares: a session, a status line, a poller, action buttons."""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from det_jupyter import client as sdk
from det_jupyter.client import DetClientError, Determined
from det_jupyter.names import visible

from ._poll import Poller

DEFAULT_INTERVAL = 1.5


def session(det: Determined | None) -> Determined:
    """The given session, else the SDK's default one (``client.login()``'s rules: the
    notebook server's identity, a cached token, ``DET_MASTER``…)."""
    return det if det is not None else sdk.current()


class LiveWidget(w.VBox):
    """A VBox fed by a ``Poller``: ``_fetch()`` (plain API data, in the poll thread) and
    ``_render(data)`` (widgets only). The first fetch runs in ``__init__`` so the widget shows
    data at once and a bad id or an unreachable master fails right there, as one
    ``DetClientError``. Closing the widget stops its poller."""

    def __init__(self, det: Determined | None, *, interval: float = DEFAULT_INTERVAL,
                 live: bool = True) -> None:
        super().__init__()
        self.det = session(det)
        self.status = w.HTML("")
        # A question and its Yes / Cancel buttons, shown before a destructive action.
        self.confirm = w.HBox(layout=w.Layout(display="none", align_items="center"))
        self.data: Any = None
        # The poll thread and the front end's events (filters, buttons) both render.
        self._lock = threading.RLock()
        self._build()
        self.poller: Poller[Any] = Poller(self._fetch, self._apply, interval=interval,
                                          done=self._done, on_error=self._error)
        self._apply(self._fetch())
        if live and not self._done(self.data):
            self.poller.start()

    # -- for subclasses -------------------------------------------------------------------

    def _build(self) -> None:
        raise NotImplementedError

    def _fetch(self) -> Any:
        raise NotImplementedError

    def _render(self, data: Any) -> None:
        raise NotImplementedError

    def _done(self, data: Any) -> bool:
        """Whether nothing more can change (stop polling after this update)."""
        return False

    # -- shared ---------------------------------------------------------------------------

    def _apply(self, data: Any) -> None:
        with self._lock:
            self.data = data
            self._render(data)

    def _locked(self, fn: Callable[[], None]) -> Callable[[Any], None]:
        """An observer that runs ``fn`` under the render lock (for ``observe``)."""
        def observer(_change: Any) -> None:
            with self._lock:
                fn()
        return observer

    def _error(self, message: str | None) -> None:
        self.status.value = ("" if message is None else
                             f"<span style='color:#b00'>{html.escape(message)}</span>")

    def refresh(self) -> None:
        """Fetch and show now (outside the poll), e.g. after an action."""
        self.poller.poll_once()

    def close(self) -> None:
        self.poller.stop()
        super().close()

    def _act(self, label: str, action: Callable[[], Any]) -> Callable[[Any], None]:
        """A button handler: run ``action``, show its failure as one line, refresh."""
        def handler(_button: Any) -> None:
            try:
                action()
            except DetClientError as exc:
                self._error(f"{label}: {exc}")
                return
            self._error(None)
            self.refresh()
        return handler

    def ask(self, question: str, yes: str, label: str, action: Callable[[], Any]) -> None:
        """Show ``question`` with a ``yes`` button that runs ``action`` (as ``_act`` does)
        and a Cancel button; nothing happens until one is clicked. ``self.confirm`` must be
        among the widget's children."""
        go = w.Button(description=yes, button_style="danger", layout=w.Layout(width="auto"))
        cancel = w.Button(description="Cancel", layout=w.Layout(width="auto"))
        run = self._act(label, action)

        def answer(button: Any) -> None:
            self.confirm.children = ()
            self.confirm.layout.display = "none"
            if button is go:
                run(button)
        go.on_click(answer)
        cancel.on_click(answer)
        self.confirm.children = (w.HTML(f"<b>{html.escape(visible(question))}</b>"), go, cancel)
        self.confirm.layout.display = "flex"


def verb_buttons(owner: LiveWidget, target: Callable[[], Any],
                 what: Callable[[], str]) -> dict[str, w.Button]:
    """Pause / Activate / Kill buttons acting on ``target()`` (an SDK ``Experiment``);
    ``what()`` names it in Kill's confirmation, which comes first (killing loses the work
    since the last checkpoint)."""
    styles = {"pause": "warning", "activate": "success", "kill": "danger"}
    buttons = {}
    for verb in ("pause", "activate"):
        b = w.Button(description=verb.capitalize(), button_style=styles[verb],
                     layout=w.Layout(width="90px"))
        b.on_click(owner._act(verb, lambda v=verb: getattr(target(), v)()))
        buttons[verb] = b
    kill = w.Button(description="Kill", button_style=styles["kill"], layout=w.Layout(width="90px"))
    kill.on_click(lambda _b: owner.ask(
        f"Kill {what()}? Its running trials stop now, without a checkpoint.", "Yes, kill",
        "kill", lambda: target().kill()))
    buttons["kill"] = kill
    return buttons


def enable_actions(buttons: dict[str, w.Button], allowed: list[str]) -> None:
    for verb, b in buttons.items():
        b.disabled = verb not in allowed
