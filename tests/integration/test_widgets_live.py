"""The live widgets against a real master and a real trial that crashes: the exception a
trial raised reaches the experiment and trial widgets, and each metric gets its own chart.
The widgets are built in this process, with the SDK session a notebook would have (what the
browser draws from them: tests/browser/test_widget_chart.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from det_jupyter import client
from det_jupyter.widgets import ExperimentWidget, TrialWidget
from tests._master import ADMIN_PASSWORD, MasterProcess, wait_for
from tests.integration._exp import submit_counter, trials

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    m = MasterProcess(tmp_path_factory.mktemp("widgets") / "master").start()
    yield m
    m.stop()


def test_a_crashed_trials_exception_reaches_the_widgets(master: MasterProcess, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path) -> None:
    monkeypatch.setenv("DET_JUPYTER_CONFIG_DIR", str(tmp_path / "cfg"))
    admin = master.admin()
    exp_id = submit_counter(admin, raise_at=3, max_restarts=0)
    wait_for(lambda: admin.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"] == "STATE_ERROR",
             timeout=120, what=f"experiment {exp_id} to end in ERROR")
    (trial,) = trials(admin, exp_id)
    det = client.Determined(master.url, "admin", ADMIN_PASSWORD)

    exp = ExperimentWidget(exp_id, det, interval=60)
    try:
        assert not exp.poller.running  # ended: nothing more to poll
        assert f"trial {trial['id']} failed: ValueError: boom at step 3" in exp.crashes.value
        training = exp.curves_chart.panels[0]
        assert training["series"][0]["x"] == [1, 2, 3]
        json.dumps(exp.curves_chart.panels, allow_nan=False)
    finally:
        exp.close()

    tw = TrialWidget(trial["id"], det, interval=60)
    try:
        assert "failed: ValueError: boom at step 3" in tw.header.value
        # One chart per metric, each on its own axes (no validation before the crash).
        assert {p["title"]: [s["name"] for s in p["series"]] for p in tw.chart.panels} == {
            "loss": ["training"], "step": ["training"]}
    finally:
        tw.close()
