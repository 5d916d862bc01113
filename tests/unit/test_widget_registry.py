"""The model-registry widget: its pure rows (exact), and the widget fed by a named test
double (no kernel, no master): choosing, filtering, registering, confirming an archive."""

from __future__ import annotations

from typing import Any

import pytest

from det_jupyter.client import NotFound
from det_jupyter.widgets import _registry_views as rv

pytest.importorskip("ipywidgets", reason="the widgets need ipywidgets (a product dependency)")

from det_jupyter.widgets import ModelRegistryWidget  # noqa: E402


def model(id_: int, name: str, **kw: Any) -> dict[str, Any]:
    return {"id": id_, "name": name, "description": "", "labels": [], "metadata": {}, "notes": "",
            "workspaceId": 1, "userId": 1, "username": "admin",
            "creationTime": "2026-11-28T10:00:00.123Z", "lastUpdatedTime": "2026-11-28T10:00:00.123Z",
            "numVersions": 0, "archived": False, **kw}


def version(n: int, uuid: str, **kw: Any) -> dict[str, Any]:
    return {"id": n, "version": n, "model": {"name": "m"}, "name": "", "comment": "", "labels": [],
            "metadata": {}, "notes": "", "username": "admin",
            "creationTime": f"2026-11-28T11:0{n}:00.5Z",
            "checkpoint": {"uuid": uuid, "state": "STATE_COMPLETED",
                           "training": {"trialId": 7, "experimentId": 3}}, **kw}


# -- pure rows --------------------------------------------------------------------------------

def test_model_row() -> None:
    m = model(4, "mnist", description="digits", labels=["cv", "prod"], numVersions=2,
              lastUpdatedTime="2026-11-28T12:34:56.789Z", username="ana", archived=True)
    assert rv.model_row(m) == {"id": 4, "name": "mnist", "description": "digits",
                              "labels": "cv, prod", "versions": 2,
                              "updated": "2026-11-28 12:34:56", "owner": "ana", "archived": True}


def test_model_row_of_sparse_json() -> None:
    assert rv.model_row({"id": "9"}) == {"id": 9, "name": "", "description": "", "labels": "",
                                        "versions": 0, "updated": "", "owner": "",
                                        "archived": False}


@pytest.mark.parametrize(("text", "archived", "ids"), [
    ("", True, [1, 2, 3]),
    ("", False, [1, 3]),
    ("MNIST", True, [1, 2]),        # name, case-insensitive
    ("digits", True, [3]),          # description
    ("prod", True, [2]),            # label
    ("bob", True, [3]),             # owner
    ("  mnist ", False, [1]),       # trimmed, and archived left out
    ("nothing", True, []),
])
def test_model_rows_filter(text: str, archived: bool, ids: list[int]) -> None:
    models = [model(3, "resnet", description="digits", username="bob"),
              model(1, "mnist"), model(2, "mnist-big", labels=["prod"], archived=True)]
    assert [r["id"] for r in rv.model_rows(models, text=text, archived=archived)] == ids


@pytest.mark.parametrize(("row", "actions"), [
    (None, []),
    ({"archived": False}, ["register", "archive", "delete"]),
    ({"archived": True}, ["unarchive", "delete"]),
])
def test_model_actions(row: dict[str, Any] | None, actions: list[str]) -> None:
    assert rv.model_actions(row) == actions


def test_version_rows_newest_first_with_their_origin() -> None:
    versions = [version(1, "aaa"),
                version(2, "bbb", name="best", comment="val 0.1", notes="keep",
                        metadata={"b": 2, "a": "x"})]
    assert rv.version_rows(versions) == [
        {"version": 2, "uuid": "bbb", "trial": 7, "experiment": 3, "name": "best",
         "comment": "val 0.1", "notes": "keep", "metadata": '{"a": "x", "b": 2}',
         "created": "2026-11-28 11:02:00"},
        {"version": 1, "uuid": "aaa", "trial": 7, "experiment": 3, "name": "", "comment": "",
         "notes": "", "metadata": "", "created": "2026-11-28 11:01:00"},
    ]


def test_version_row_of_a_checkpoint_without_training() -> None:
    row = rv.version_row({"version": 1, "checkpoint": {"uuid": "u"}})
    assert (row["uuid"], row["trial"], row["experiment"]) == ("u", None, None)


def test_model_details() -> None:
    assert rv.model_details(model(1, "m", notes="# Notes\nline", metadata={"z": 1, "a": [1]})) == [
        ("Notes", "# Notes\nline"), ("Metadata", '{"a": [1], "z": 1}')]
    assert rv.model_details(model(1, "m")) == [("Notes", ""), ("Metadata", "")]


# -- the widget, fed by a test double ------------------------------------------------------

class _Model:
    def __init__(self, reg: FakeRegistry, data: dict[str, Any]) -> None:
        self.reg, self.data, self.id = reg, data, data["id"]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def versions(self) -> list[Any]:
        return [_Version(x) for x in sorted(self.reg.versions.get(self.id, []),
                                            key=lambda x: -x["version"])]

    def register_version(self, uuid: str, *, comment: str | None = None) -> None:
        vs = self.reg.versions.setdefault(self.id, [])
        vs.append(version(len(vs) + 1, uuid, comment=comment or ""))
        self.data["numVersions"] = len(vs)
        self.reg.calls.append(("register", self.id, uuid))

    def archive(self, archived: bool = True) -> None:
        self.data["archived"] = archived
        self.reg.calls.append(("archive" if archived else "unarchive", self.id))

    def delete(self) -> None:
        self.reg.models.remove(self.data)
        self.reg.calls.append(("delete", self.id))


class _Version:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


class FakeRegistry:
    """A ``Determined`` with only the model-registry calls, over an in-memory registry;
    records every change it is asked for."""

    def __init__(self, models: list[dict[str, Any]]) -> None:
        self.models = models
        self.versions: dict[int, list[dict[str, Any]]] = {}
        self.calls: list[tuple[Any, ...]] = []

    def search_models(self, **_kw: Any) -> list[_Model]:
        return [_Model(self, m) for m in self.models]

    def get_model(self, name_or_id: str | int) -> _Model:
        for m in self.models:
            if name_or_id in (m["id"], m["name"]):
                return _Model(self, m)
        raise NotFound(404, f"model {name_or_id} not found")

    def create_model(self, name: str, *, description: str = "") -> _Model:
        m = model(max([x["id"] for x in self.models], default=0) + 1, name, description=description)
        self.models.append(m)
        self.calls.append(("create", name))
        return _Model(self, m)


def registry_widget(reg: FakeRegistry, **kw: Any) -> ModelRegistryWidget:
    return ModelRegistryWidget(reg, live=False, **kw)  # type: ignore[arg-type]


def test_widget_lists_models_and_shows_the_chosen_ones_versions() -> None:
    reg = FakeRegistry([model(1, "mnist", notes="the <b>notes</b>"), model(2, "resnet")])
    reg.versions[1] = [version(1, "ckpt-one", comment="first")]
    w = registry_widget(reg)
    assert "2 models registered" in w.summary.value
    assert "mnist" in w.table.value and "resnet" in w.table.value
    assert w.versions.value == "" and w.buttons["archive"].disabled
    w.selected.value = 1
    assert "ckpt-one" in w.versions.value and "first" in w.versions.value
    assert "the &lt;b&gt;notes&lt;/b&gt;" in w.details.value  # text, never markup
    assert not w.buttons["archive"].disabled and w.buttons["unarchive"].disabled
    w.filter.value = "resnet"
    assert "mnist" not in w.table.value and "resnet" in w.table.value
    assert w.selected.value == 1  # the chosen model stays chosen while filtered out


def test_widget_registers_and_creates() -> None:
    reg = FakeRegistry([model(1, "mnist")])
    w = registry_widget(reg, model="mnist")
    w.register.click()
    assert "enter the uuid" in w.status.value and reg.calls == []
    w.uuid.value = " ckpt-9 "
    w.register.click()
    assert reg.calls == [("register", 1, "ckpt-9")] and "ckpt-9" in w.versions.value
    assert w.uuid.value == "" and w.status.value == ""
    w.new_name.value, w.new_description.value = "fresh", "new one"
    w.create.click()
    assert reg.calls[-1] == ("create", "fresh") and w.selected.value == 2
    assert "new one" in w.details.value and "no versions yet" in w.versions.value


def test_archive_acts_only_after_yes_and_cancel_drops_it() -> None:
    reg = FakeRegistry([model(1, "mnist")])
    w = registry_widget(reg, model=1)
    assert w.confirm_row.layout.display == "none"
    w.buttons["archive"].click()
    assert reg.calls == []  # asked, not done
    assert w.confirm_row.layout.display == "flex" and w.yes.description == "Yes, archive"
    assert "Archive model <b>mnist</b>?" in w.confirm_text.value
    w.cancel.click()
    assert w.confirm_row.layout.display == "none" and reg.calls == []
    w.buttons["archive"].click()
    w.yes.click()
    assert reg.calls == [("archive", 1)] and w.confirm_row.layout.display == "none"
    assert w.buttons["archive"].disabled and not w.buttons["unarchive"].disabled
    assert w.register.disabled  # an archived model takes no new versions
    w.buttons["unarchive"].click()  # not destructive: at once
    assert reg.calls[-1] == ("unarchive", 1)


def test_delete_asks_too_and_choosing_another_model_drops_the_question() -> None:
    reg = FakeRegistry([model(1, "mnist"), model(2, "resnet")])
    w = registry_widget(reg, model=1)
    w.buttons["delete"].click()
    assert w.yes.description == "Yes, delete"
    w.selected.value = 2
    assert w.confirm_row.layout.display == "none"
    w.yes.click()  # a stale click does nothing
    assert reg.calls == []
    w.buttons["delete"].click()
    w.yes.click()
    assert reg.calls == [("delete", 2)] and w.selected.value is None
    assert "resnet" not in w.table.value


def test_an_unknown_model_fails_at_once() -> None:
    with pytest.raises(NotFound):
        registry_widget(FakeRegistry([]), model="nope")


class NoRegistry(FakeRegistry):
    def search_models(self, **_kw: Any) -> list[_Model]:
        raise NotFound(404, "not found")


def test_a_master_without_a_registry_says_so() -> None:
    w = registry_widget(NoRegistry([]))
    assert "not available" in w.summary.value and list(w.children) == [w.summary]


def test_a_fetch_from_before_the_users_choice_does_not_undo_it() -> None:
    reg = FakeRegistry([model(1, "mnist"), model(2, "resnet")])
    reg.versions[2] = [version(1, "ckpt-two")]
    w = registry_widget(reg)
    stale = w._fetch()  # the poll thread fetched with no model chosen…
    w.selected.value = 2  # …then the user chose one, before that fetch was shown
    w._apply(stale)
    assert w.selected.value == 2 and "ckpt-two" in w.versions.value


def test_a_model_deleted_elsewhere_is_no_longer_chosen() -> None:
    reg = FakeRegistry([model(1, "mnist"), model(2, "resnet")])
    w = registry_widget(reg, model=2)
    reg.models.pop()
    w.refresh()
    assert w.selected.value is None and w.versions.value == "" and w.details.value == ""
    assert w.buttons["delete"].disabled
