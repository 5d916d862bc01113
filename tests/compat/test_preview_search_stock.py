"""The stock ``det preview-search`` against det-jupyter: the plan of an ASHA search (worked by
hand in tests/unit/test_search_preview.py), a single search, and bad configs refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests._master import ADMIN_PASSWORD, MasterProcess

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("preview") / "master").start()
    yield m
    m.stop()


def _rows(out: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(2).strip()) for m in re.finditer(r"^\s*(\d+)\s*\|\s*(.+)$", out, re.M)]


def test_preview_search(det_env, master: MasterProcess, tmp_path: Path) -> None:
    def preview(config: dict) -> object:
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(config))
        res = det_env.det(["preview-search", str(path)], master.url, user="admin", password=ADMIN_PASSWORD)
        assert "Traceback" not in res.stderr
        return res

    asha = {"name": "asha", "entrypoint": "python3 train.py",
            "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
            "searcher": {"name": "adaptive_asha", "metric": "loss", "max_trials": 16,
                         "time_metric": "batches", "max_time": 1000}}
    res = preview(asha)
    assert res.returncode == 0, res.stderr
    assert "Using search configuration:" in res.stdout and "adaptive_asha" in res.stdout
    assert _rows(res.stdout) == [(9, "train for 62 batches"), (5, "train for 250 batches"),
                                 (2, "train for 1000 batches")]
    single = preview({"searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 5}}})
    assert single.returncode == 0, single.stderr
    assert _rows(single.stdout) == [(1, "train to completion")]
    typo = preview({"searcher": {"name": "single", "metric": "loss", "max_lenght": 5}})
    assert typo.returncode != 0 and "max_lenght" in typo.stderr
    none = preview({"searcher": {"name": "random", "metric": "loss"}})
    assert none.returncode != 0 and "max_trials" in none.stderr
