"""Config templates: named config fragments stored in the master, each in one workspace.

A template's name is unique across the cluster. Applying one (``expand``) merges it into a
submitted config by ``det_jupyter.config._merge``'s rules; the caller stores the result, so a
later edit of the template never changes what an experiment or task already ran with.
Authorization is the caller's (the handler knows the principal); this service only keeps the
rows and tells ``on_moved`` when a template's name or workspace changes (cached locations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ... import names as _names
from ...config import check_template_config, check_template_keys, merge_template, task_keys_only
from ...errors import Conflict, InvalidConfig, InvalidRequest, NotFound
from ...store import reader
from ...store import templates as store

MAX_NAME = 255


@dataclass(frozen=True)
class Template:
    name: str
    config: dict[str, Any]
    workspace_id: int

    def to_json(self) -> dict[str, Any]:
        """A ``v1Template``."""
        return {"name": self.name, "config": self.config, "workspaceId": self.workspace_id}


def check_name(name: object) -> str:
    """A usable template name (``_names.check_name``'s rules: no '/', it goes in URLs), or
    InvalidRequest saying what is wrong with it."""
    return _names.check_name("template name", name, max_len=MAX_NAME)


def check_config(config: object) -> dict[str, Any]:
    """A template's config (a mapping that names no template, with no key that neither an
    experiment nor a task config takes), or InvalidRequest (400)."""
    try:
        checked = check_template_config(config)
        check_template_keys(checked)
        return checked
    except InvalidConfig as exc:
        raise InvalidRequest(exc.message) from None


class TemplateService:
    def __init__(self, engine: sa.Engine, on_moved: Callable[[], None] | None = None) -> None:
        self._engine = engine
        self._reader = reader(engine)
        self._on_moved = on_moved or (lambda: None)

    # -- reads ------------------------------------------------------------------------------

    def get(self, name: str) -> Template:
        with self._reader.connect() as conn:
            row = store.get(conn, name)
        if row is None:
            raise NotFound(f"template {name} not found")
        return _template(row)

    def list(self, *, name: str | None = None, workspace_ids: Iterable[int] | None = None,
             visible: frozenset[int] | None = None, offset: int = 0, limit: int = 0,
             descending: bool = False) -> tuple[list[Template], int]:
        """Templates by name, with the total before paging. ``name``: a case-insensitive
        substring; ``workspace_ids``: only those workspaces; ``visible``: the workspaces the
        caller may see templates in (None: all). ``offset`` < 0 counts from the end;
        ``limit`` 0 means no limit."""
        with self._reader.connect() as conn:
            rows = [_template(r) for r in store.listed(conn, name=name, workspace_ids=set(workspace_ids or ()),
                                                       visible=visible, descending=descending)]
        total = len(rows)
        start = max(total + offset, 0) if offset < 0 else offset
        end = total if limit <= 0 else start + limit
        return rows[start:end], total

    def expand(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """Task config ``config`` with template ``name`` merged in (config wins; see
        ``config._merge``). Of the template only what a task config takes is used, as 0.38.1
        reads a template into a task leniently: an experiment template still serves a notebook."""
        return merge_template(task_keys_only(self.get(name).config), config)

    # -- writes -----------------------------------------------------------------------------

    def create(self, name: str, config: object, workspace_id: int) -> Template:
        """A new template; Conflict (409) when the name is taken (names are cluster-wide)."""
        tpl = Template(check_name(name), check_config(config), workspace_id)
        try:
            with self._engine.begin() as conn:
                if store.exists(conn, name):
                    raise _taken(name)
                store.insert(conn, tpl.name, tpl.config, tpl.workspace_id)
        except sa.exc.IntegrityError:
            raise _taken(name) from None
        return tpl

    def set_config(self, name: str, config: object) -> Template:
        cfg = check_config(config)
        with self._engine.begin() as conn:
            n = store.update(conn, name, config=cfg)
        if n == 0:
            raise NotFound(f"template {name} not found")
        return self.get(name)

    def move(self, name: str, workspace_id: int) -> Template:
        with self._engine.begin() as conn:
            n = store.update(conn, name, workspace_id=workspace_id)
        self._on_moved()
        if n == 0:
            raise NotFound(f"template {name} not found")
        return self.get(name)

    def rename(self, old: str, new: str) -> Template:
        new = check_name(new)
        if new == old:
            return self.get(old)
        try:
            with self._engine.begin() as conn:
                if store.exists(conn, new):
                    raise _taken(new)
                n = store.update(conn, old, name=new)
                if n == 0:
                    raise NotFound(f"template {old} not found")
        except sa.exc.IntegrityError:
            raise _taken(new) from None
        self._on_moved()
        return self.get(new)

    def delete(self, name: str) -> None:
        with self._engine.begin() as conn:
            n = store.delete(conn, name)
        self._on_moved()
        if n == 0:
            raise NotFound(f"template {name} not found")


def _template(row: Any) -> Template:
    return Template(row.name, dict(row.config or {}), row.workspace_id)


def _taken(name: str) -> Conflict:
    return Conflict(f"a template named {name} already exists (names are unique across the "
                    "cluster); pick another name, or change that one with PATCH / "
                    "`det template set-value config`")
