"""Config templates (``det template``): functions over a ``Determined`` session.

A template is a named config fragment stored in the master, in one workspace; an experiment
or task that names it (``create_experiment(..., template=NAME)``) gets it merged into its
config at submit, and keeps that merged config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from ._errors import InvalidInput


def _path(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidInput("a template name must be a non-empty string")
    return "/api/v1/templates/" + quote(name, safe="")


def load_template_config(source: dict[str, Any] | str | os.PathLike) -> dict[str, Any]:
    """A template's config from a dict or a YAML file's path (a mapping, else InvalidInput)."""
    if isinstance(source, dict):
        return source
    try:
        text = Path(source).read_text()
    except OSError as exc:
        raise InvalidInput(f"cannot read the template file {os.fspath(source)}: "
                           f"{exc.strerror or exc}") from None
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{os.fspath(source)} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{os.fspath(source)} must hold a YAML mapping (key: value lines)")
    return parsed


def list_templates(d: Any, name: str | None = None,
                   workspace_ids: list[int] | None = None) -> list[dict[str, Any]]:
    """Templates you may see (``v1Template``: name, config, workspaceId), by name;
    ``name`` matches a part of the name, case-insensitively."""
    params: dict[str, Any] = {"name": name, "workspaceIds": workspace_ids or None}
    body = d._session.request("GET", "/api/v1/templates", params=params)
    return body.get("templates") or []


def get_template(d: Any, name: str) -> dict[str, Any]:
    """The template ``name``; ``NotFound`` when there is none you may see."""
    return d._session.get(_path(name))["template"]


def create_template(d: Any, name: str, config: dict[str, Any] | str | os.PathLike,
                    workspace_id: int | None = None) -> dict[str, Any]:
    """A new template (``Conflict`` when the name is taken); in Uncategorized unless
    ``workspace_id`` is given."""
    body = {"name": name, "config": load_template_config(config), "workspaceId": workspace_id or 0}
    return d._session.post(_path(name), body)["template"]


def set_template_config(d: Any, name: str, config: dict[str, Any] | str | os.PathLike) -> dict[str, Any]:
    """Replace the config of template ``name`` (experiments made with it keep their own)."""
    return d._session.request("PATCH", _path(name), load_template_config(config))["template"]


def rename_template(d: Any, old: str, new: str) -> dict[str, Any]:
    return d._session.request("PATCH", "/api/v1/template/rename",
                              {"oldName": old, "newName": new})["template"]


def delete_template(d: Any, name: str) -> None:
    d._session.request("DELETE", _path(name))
