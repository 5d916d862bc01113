"""Pure rules of workspaces, projects and experiment deletion: names, keys, paging, bulk
filters, and which directories a delete may remove."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from det_jupyter.errors import InvalidRequest
from det_jupyter.services.experiments.admin import BulkFilters
from det_jupyter.services.experiments.purge import Doomed, remove_dirs, storage_root
from det_jupyter.services.workspaces.rows import (
    check_key,
    check_name,
    check_notes,
    key_candidates,
    offset_window,
)


@pytest.mark.parametrize(("raw", "expected"), [("a", "a"), ("  team a ", "team a"), ("x" * 80, "x" * 80)])
def test_names_are_trimmed(raw: str, expected: str) -> None:
    assert check_name(raw, "workspace") == expected


@pytest.mark.parametrize(("raw", "fragment"), [
    ("", "must not be empty"), ("   ", "must not be empty"), ("x" * 81, "81 characters"),
    (None, "must be a string"), (3, "must be a string"), ("a\tb", r"U\+0009 \(\\t\), a control character"),
])
def test_bad_names_say_what_is_wrong(raw: object, fragment: str) -> None:
    with pytest.raises(InvalidRequest, match=fragment):
        check_name(raw, "project")


def test_keys() -> None:
    assert check_key("ab1") == "AB1"
    for bad in ("", "abcdef", "a-b", None, 5):
        with pytest.raises(InvalidRequest, match="1 to 5 letters or digits"):
            check_key(bad)
    assert list(key_candidates("my vision!"))[:3] == ["MYV", "MYV1", "MYV2"]
    assert next(iter(key_candidates("---"))) == "PRJ"
    assert all(len(k) <= 5 for k in key_candidates("abcdef"))


def test_notes() -> None:
    assert check_notes([{"name": "a", "contents": "b"}, {}]) == [
        {"name": "a", "contents": "b"}, {"name": "", "contents": ""}]
    with pytest.raises(InvalidRequest, match=r"notes\[0\]"):
        check_notes([{"name": 1}])
    with pytest.raises(InvalidRequest):
        check_notes("x")


@pytest.mark.parametrize(("offset", "limit", "total", "expected"), [
    (0, 0, 10, (0, 0)), (3, 2, 10, (3, 2)), (-2, 0, 10, (8, 0)), (-20, 5, 10, (0, 5)),
])
def test_offset_window(offset: int, limit: int, total: int, expected: tuple[int, int]) -> None:
    assert offset_window(offset, limit, total) == expected


def test_bulk_filters() -> None:
    f = BulkFilters.parse({"name": "x", "states": ["STATE_RUNNING", "STATE_COMPLETED"], "archived": False,
                           "userIds": [2], "excludedExperimentIds": [5], "labels": ["l"]})
    assert (f.states, f.user_ids, f.excluded, f.labels, f.archived) == (("ACTIVE", "COMPLETED"), (2,), (5,),
                                                                        ("l",), False)
    assert BulkFilters.parse({}) == BulkFilters()
    for bad, where in (({"userIds": ["a"]}, "filters.userIds"), ({"archived": "no"}, "filters.archived"),
                       ({"labels": "a"}, "filters.labels"), ([], "filters must be")):
        with pytest.raises(InvalidRequest, match=where):
            BulkFilters.parse(bad)


def test_storage_root() -> None:
    assert storage_root({"type": "shared_fs", "host_path": "/ck"}) == "/ck"
    assert storage_root({"type": "shared_fs", "host_path": "/ck", "storage_path": "s"}) == "/ck/s"
    # directory storage: where the process runtime's tasks write (the checkpoint GC's rule too)
    assert storage_root({"type": "directory", "container_path": "/c"}) == "/c"
    assert storage_root(None) is None


def test_remove_dirs_stays_under_its_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "u1").mkdir(parents=True)
    (root / "u1" / "f").write_text("x")
    outside.mkdir()
    (root / "link").symlink_to(outside)
    doomed = [Doomed(str(root / "u1"), str(root)), Doomed(str(root / "link"), str(root)),
              Doomed(str(root / ".." / "outside"), str(root)), Doomed(str(root / "missing"), str(root)),
              Doomed(str(root), str(root))]
    assert remove_dirs(doomed) == 1
    assert not (root / "u1").exists() and outside.is_dir() and root.is_dir()
    assert os.path.islink(root / "link")
