"""What the model-registry widget shows, as pure functions of the master's JSON (no kernel,
no I/O); tested in tests/unit/test_widget_registry.py."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ._views import short_time

MODEL_COLUMNS = ("name", "description", "labels", "versions", "updated", "owner", "archived")
VERSION_COLUMNS = ("version", "uuid", "trial", "experiment", "name", "comment", "notes",
                   "metadata", "created")


def model_row(m: Mapping[str, Any]) -> dict[str, Any]:
    """One ``v1Model`` as a row of the registry's models table."""
    return {
        "id": int(m["id"]), "name": str(m.get("name") or ""),
        "description": str(m.get("description") or ""),
        "labels": ", ".join(str(label) for label in m.get("labels") or []),
        "versions": int(m.get("numVersions") or 0),
        "updated": short_time(m.get("lastUpdatedTime")),
        "owner": str(m.get("username") or ""), "archived": bool(m.get("archived")),
    }


def model_rows(models: Iterable[Mapping[str, Any]], *, text: str = "",
               archived: bool = True) -> list[dict[str, Any]]:
    """The models table, by id: filtered by ``text`` (in the name, description, labels or
    owner, case-insensitive); archived models only with ``archived``."""
    needle = text.strip().lower()
    rows = sorted((model_row(m) for m in models), key=lambda r: r["id"])
    return [r for r in rows
            if (archived or not r["archived"])
            and (not needle or needle in
                 f"{r['name']} {r['description']} {r['labels']} {r['owner']}".lower())]


def model_actions(row: Mapping[str, Any] | None) -> list[str]:
    """What may be done to the chosen model: ``register`` (a new version; not when archived),
    ``archive`` or ``unarchive``, and ``delete``. Nothing without a model."""
    if row is None:
        return []
    return ["unarchive", "delete"] if row["archived"] else ["register", "archive", "delete"]


def version_row(v: Mapping[str, Any]) -> dict[str, Any]:
    """One ``v1ModelVersion`` as a row: its checkpoint and where that came from."""
    ckpt = v.get("checkpoint") or {}
    training = ckpt.get("training") or {}
    metadata = v.get("metadata") or {}
    return {
        "version": int(v["version"]), "uuid": str(ckpt.get("uuid") or ""),
        "trial": training.get("trialId"), "experiment": training.get("experimentId"),
        "name": str(v.get("name") or ""), "comment": str(v.get("comment") or ""),
        "notes": str(v.get("notes") or ""),
        "metadata": json.dumps(metadata, sort_keys=True) if metadata else "",
        "created": short_time(v.get("creationTime")),
    }


def version_rows(versions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A model's versions, newest first."""
    return sorted((version_row(v) for v in versions), key=lambda r: r["version"], reverse=True)


def model_details(m: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The chosen model's notes and metadata, as (label, text) pairs."""
    metadata = m.get("metadata") or {}
    return [("Notes", str(m.get("notes") or "")),
            ("Metadata", json.dumps(metadata, sort_keys=True) if metadata else "")]
