"""The model registry: models, the chosen model's versions, and what may be done to them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ipywidgets as w

from det_jupyter.client import Determined, InvalidInput, NotFound
from det_jupyter.names import visible

from . import _registry_views as rv
from . import _views as v
from ._base import LiveWidget

_CONFIRM = {"archive": "Yes, archive", "delete": "Yes, delete"}  # the destructive actions


class ModelRegistryWidget(LiveWidget):
    """Models (name, description, labels, versions, last updated, owner, archived) with a text
    filter; the chosen model's notes, metadata and versions (checkpoint, the trial and
    experiment it came from, name, comment, notes, metadata); create a model, register a
    checkpoint as the chosen model's next version, archive / unarchive or delete it. Archive
    and delete act only after a second click on ``Yes, …`` (``Cancel`` drops them).

    ``model``: a name or id to show at once (``NotFound`` if there is none you may see);
    ``text``: the filter's first value; ``archived``: whether archived models are listed;
    ``labels`` / ``workspace_names``: only models with those labels / in those workspaces.
    """

    def __init__(self, det: Determined | None = None, *, model: str | int | None = None,
                 text: str = "", archived: bool = True, labels: Iterable[str] = (),
                 workspace_names: Iterable[str] = (), interval: float = 2.0,
                 live: bool = True) -> None:
        self._wanted = model
        self._chosen: int | None = None  # the chosen model's id (what _fetch fetches versions of)
        self._pending: tuple[str, int] | None = None  # (action, model id) awaiting "Yes, …"
        self._rendering = False  # _render is setting the dropdown: not a user's choice
        self._text, self._archived = text, archived
        self.labels, self.workspace_names = list(labels), list(workspace_names)
        super().__init__(det, interval=interval, live=live)

    # -- layout ---------------------------------------------------------------------------

    def _build(self) -> None:
        self.summary = w.HTML()
        self.filter = w.Text(value=self._text, placeholder="filter: name, description, label, owner",
                             layout=w.Layout(width="280px"))
        self.show_archived = w.Checkbox(value=self._archived, description="archived too",
                                        indent=False)
        self.table = w.HTML()
        self.selected = w.Dropdown(options=[("—", None)], value=None, description="model",
                                   layout=w.Layout(width="320px"))
        self.buttons = {
            "archive": w.Button(description="Archive", button_style="warning"),
            "unarchive": w.Button(description="Unarchive"),
            "delete": w.Button(description="Delete", button_style="danger"),
        }
        self.buttons["archive"].on_click(lambda _b: self._ask("archive"))
        self.buttons["delete"].on_click(lambda _b: self._ask("delete"))
        self.buttons["unarchive"].on_click(self._act("unarchive", lambda: self._model().archive(False)))
        self.confirm_text = w.HTML()
        self.yes = w.Button(description="Yes", button_style="danger")
        self.cancel = w.Button(description="Cancel")
        self.yes.on_click(lambda b: self._act(self._pending[0] if self._pending else "confirm",
                                              self._confirmed)(b))
        self.cancel.on_click(lambda _b: self._set_pending(None))
        self.confirm_row = w.HBox([self.confirm_text, self.yes, self.cancel],
                                  layout=w.Layout(display="none"))
        self.details = w.HTML()
        self.versions = w.HTML()
        self.uuid = w.Text(placeholder="checkpoint uuid", layout=w.Layout(width="320px"))
        self.comment = w.Text(placeholder="comment (optional)", layout=w.Layout(width="220px"))
        self.register = w.Button(description="Register version", button_style="success",
                                 layout=w.Layout(width="140px"))
        self.register.on_click(self._act("register", self._register))
        self.new_name = w.Text(placeholder="new model name", layout=w.Layout(width="200px"))
        self.new_description = w.Text(placeholder="description", layout=w.Layout(width="280px"))
        self.create = w.Button(description="Create model", layout=w.Layout(width="120px"))
        self.create.on_click(self._act("create", self._create))
        for control in (self.filter, self.show_archived):
            control.observe(self._locked(lambda: self._render(self.data)), names="value")
        self.selected.observe(self._locked(self._choose), names="value")
        self._parts = [
            self.summary, w.HBox([self.filter, self.show_archived]), self.table,
            w.HBox([self.selected, *self.buttons.values()]), self.confirm_row,
            self.details, self.versions, w.HBox([self.uuid, self.comment, self.register]),
            w.HBox([self.new_name, self.new_description, self.create]), self.status,
        ]
        self.children = self._parts

    # -- data -----------------------------------------------------------------------------

    def _fetch(self) -> dict[str, Any]:
        try:
            models = [m.to_dict() for m in self.det.search_models(
                labels=self.labels, workspace_names=self.workspace_names)]
        except NotFound:
            if self.labels or self.workspace_names:
                raise
            return {"models": None, "chosen": None, "gone": None, "versions": []}  # no registry
        if self._chosen is None and self._wanted is not None:
            self._chosen = self.det.get_model(self._wanted).id
            self._wanted = None
        chosen, gone, versions = self._chosen, None, []
        if chosen is not None:
            try:
                versions = [x.to_dict() for x in self.det.get_model(chosen).versions()]
            except NotFound:  # deleted meanwhile
                chosen, gone = None, chosen
        return {"models": models, "chosen": chosen, "gone": gone, "versions": versions}

    def rows(self) -> list[dict[str, Any]]:
        return rv.model_rows((self.data or {}).get("models") or [], text=self.filter.value,
                            archived=self.show_archived.value)

    def chosen_row(self) -> dict[str, Any] | None:
        models = (self.data or {}).get("models") or []
        found = [m for m in models if int(m["id"]) == self._chosen]
        return rv.model_row(found[0]) if found else None

    # -- rendering ------------------------------------------------------------------------

    def _render(self, data: dict[str, Any]) -> None:
        if data["models"] is None:
            self.summary.value = f"<i>{v.html_text(v.REGISTRY_UNAVAILABLE)}</i>"
            self.children = [self.summary]
            return
        if list(self.children) != self._parts:
            self.children = self._parts
        self.summary.value = f"<i>{v.html_text(v.registry_message(data))}</i>"
        rows = self.rows()
        self.table.value = v.html_table(
            ["ID", "Name", "Description", "Labels", "Versions", "Last updated", "Owner", "Archived"],
            [[r["id"], r["name"], r["description"], r["labels"], r["versions"], r["updated"],
              r["owner"], r["archived"]] for r in rows])
        if data["gone"] is not None and data["gone"] == self._chosen:
            self._chosen = None  # deleted meanwhile
        chosen = self.chosen_row()
        listed = rows + ([chosen] if chosen and chosen["id"] not in [r["id"] for r in rows] else [])
        options = [("—", None), *[(visible(f"{r['name']} ({r['id']})"), r["id"]) for r in listed]]
        self._rendering = True
        try:
            if options != list(self.selected.options):
                self.selected.options = options
            if self.selected.value != self._chosen:
                self.selected.value = self._chosen
        finally:
            self._rendering = False
        allowed = rv.model_actions(chosen)
        for action, button in self.buttons.items():
            button.disabled = action not in allowed
        self.register.disabled = "register" not in allowed
        if self._pending and (self._pending[1] != self._chosen or self._pending[0] not in allowed):
            self._pending = None
        self._show_pending(chosen)
        if data["chosen"] != self._chosen:
            # Fetched before the user chose another model: its versions come with the next
            # fetch (the choice's own refresh), so leave what is shown.
            return
        model = next((m for m in data["models"] if int(m["id"]) == self._chosen), None)
        if model is None:
            self.details.value = self.versions.value = ""
            return
        h = v.html_text
        self.details.value = (
            f"<b>Model {h(model['name'])}</b> ({h(model['id'])}) · {h(model.get('description'))}"
            + v.html_table(["", ""], rv.model_details(model)))
        vrows = rv.version_rows(data["versions"])
        self.versions.value = (v.html_table(
            ["Version", "Checkpoint", "Trial", "Experiment", "Name", "Comment", "Notes",
             "Metadata", "Created"],
            [[r[c] for c in rv.VERSION_COLUMNS] for r in vrows]) if vrows else "<i>no versions yet</i>")

    def _show_pending(self, chosen: dict[str, Any] | None) -> None:
        if self._pending is None or chosen is None:
            self.confirm_row.layout = w.Layout(display="none")
            self.confirm_text.value = ""
            return
        action = self._pending[0]
        self.confirm_text.value = (f"{v.html_text(action.capitalize())} model "
                                   f"<b>{v.html_text(chosen['name'])}</b>?")
        self.yes.description = _CONFIRM[action]
        self.confirm_row.layout = w.Layout(display="flex")

    # -- the user's actions ---------------------------------------------------------------

    def _choose(self) -> None:
        if self._rendering:
            return
        self._chosen = self.selected.value
        self._pending = None
        self.refresh()

    def _set_pending(self, pending: tuple[str, int] | None) -> None:
        with self._lock:
            self._pending = pending
            self._show_pending(self.chosen_row())

    def _ask(self, action: str) -> None:
        """A destructive action: show its ``Yes, …`` / ``Cancel`` row; nothing happens yet."""
        if self._chosen is not None:
            self._set_pending((action, self._chosen))

    def _confirmed(self) -> None:
        pending = self._pending
        self._set_pending(None)
        if pending is None:
            return
        action, model_id = pending
        model = self.det.get_model(model_id)
        if action == "archive":
            model.archive(True)
        else:
            model.delete()
            self._chosen = None

    def _model(self) -> Any:
        if self._chosen is None:
            raise InvalidInput("choose a model first")
        return self.det.get_model(self._chosen)

    def _register(self) -> None:
        uuid = self.uuid.value.strip()
        if not uuid:
            raise InvalidInput("enter the uuid of a COMPLETED checkpoint")
        self._model().register_version(uuid, comment=self.comment.value.strip() or None)
        self.uuid.value = self.comment.value = ""

    def _create(self) -> None:
        name = self.new_name.value.strip()
        if not name:
            raise InvalidInput("enter the new model's name")
        model = self.det.create_model(name, description=self.new_description.value.strip())
        self._chosen = model.id
        self.new_name.value = self.new_description.value = ""
