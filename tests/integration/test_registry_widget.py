"""The model-registry widget against a real master, in-process with a real SDK session: it
creates a model, registers a real checkpoint of a finished experiment, shows it, asks before
archiving; and a live widget picks up a model created elsewhere."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from det_jupyter.client import Determined
from tests._master import Client, MasterProcess, create_experiment, wait_experiment
from tests.integration._exp import COUNTER, counter_config

pytest.importorskip("ipywidgets", reason="the widgets need ipywidgets (a product dependency)")
pytestmark = pytest.mark.slow

from det_jupyter.widgets import ModelRegistryWidget  # noqa: E402


@dataclass
class Cluster:
    master: MasterProcess
    admin: Client
    det: Determined
    exp_id: int
    ckpts: list[dict[str, Any]]  # the experiment's checkpoints, by steps


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    m = MasterProcess(tmp_path_factory.mktemp("registry-widget") / "master").start()
    try:
        admin = m.admin()
        cfg = yaml.safe_load(counter_config(length=10, sleep=0.01, ckpt_every=5))
        cfg["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(m.data_dir / "checkpoints"),
                                     "save_trial_latest": 5}
        exp_id = create_experiment(admin, yaml.safe_dump(cfg), COUNTER)["experiment"]["id"]
        assert wait_experiment(admin, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}) == "STATE_COMPLETED"
        ckpts = sorted(admin.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"],
                       key=lambda c: c["metadata"]["steps_completed"])
        assert [c["metadata"]["steps_completed"] for c in ckpts] == [5, 10]
        yield Cluster(m, admin, Determined(m.url, token=m.login()), exp_id, ckpts)
    finally:
        m.stop()


def _model(admin: Client, name: str) -> dict[str, Any]:
    model: dict[str, Any] = admin.get(f"/api/v1/models/{urllib.parse.quote(name, safe='')}")["model"]
    return model


def test_create_register_show_and_archive_after_confirmation(cluster: Cluster) -> None:
    admin, ckpt = cluster.admin, cluster.ckpts[-1]
    w = ModelRegistryWidget(cluster.det, live=False)
    try:
        assert "0 models registered" in w.summary.value

        # Create: the new model exists on the master and is the chosen one.
        w.new_name.value, w.new_description.value = "digits <cnn>", "handwritten"
        w.create.click()
        assert w.status.value == "", w.status.value
        model = _model(admin, "digits <cnn>")
        assert (model["description"], model["numVersions"]) == ("handwritten", 0)
        assert w.selected.value == model["id"]
        assert "digits &lt;cnn&gt;" in w.table.value and "<cnn>" not in w.table.value
        assert "no versions yet" in w.versions.value

        # A checkpoint that does not exist: one line, nothing registered.
        w.uuid.value = "no-such-checkpoint"
        w.register.click()
        assert w.status.value.startswith("<span") and "register: " in w.status.value
        assert "not found" in w.status.value and "Traceback" not in w.status.value
        assert _model(admin, "digits <cnn>")["numVersions"] == 0

        # A real checkpoint becomes version 1; the widget shows where it came from.
        w.uuid.value, w.comment.value = ckpt["uuid"], "after 10 batches"
        w.register.click()
        assert w.status.value == "", w.status.value
        (version,) = admin.get(f"/api/v1/models/{model['id']}/versions")["modelVersions"]
        assert (version["version"], version["checkpoint"]["uuid"], version["comment"]) == \
            (1, ckpt["uuid"], "after 10 batches")
        trial_id = ckpt["training"]["trialId"]
        for text in (ckpt["uuid"], "after 10 batches", f">{trial_id}<", f">{cluster.exp_id}<"):
            assert text in w.versions.value, (text, w.versions.value)
        assert "1 model registered" in w.summary.value

        # Archive asks first: Cancel leaves the model as it is.
        w.buttons["archive"].click()
        assert w.confirm_row.layout.display == "flex" and w.yes.description == "Yes, archive"
        assert _model(admin, "digits <cnn>")["archived"] is False
        w.cancel.click()
        assert w.confirm_row.layout.display == "none"
        assert _model(admin, "digits <cnn>")["archived"] is False
        # … and "Yes, archive" archives it.
        w.buttons["archive"].click()
        w.yes.click()
        assert w.status.value == "", w.status.value
        assert _model(admin, "digits <cnn>")["archived"] is True
        assert w.register.disabled and not w.buttons["unarchive"].disabled
        w.buttons["unarchive"].click()
        assert _model(admin, "digits <cnn>")["archived"] is False
    finally:
        w.close()


def test_a_live_widget_shows_a_model_created_elsewhere(cluster: Cluster) -> None:
    w = ModelRegistryWidget(cluster.det, interval=0.3)
    try:
        assert w.poller.running
        cluster.admin.post("/api/v1/models", {"name": "made-by-rest", "notes": "from REST",
                                              "metadata": {"owner": "team-a"}})
        deadline = time.time() + 15
        while time.time() < deadline and "made-by-rest" not in w.table.value:
            time.sleep(0.1)
        assert "made-by-rest" in w.table.value
        w.selected.value = _model(cluster.admin, "made-by-rest")["id"]
        assert "from REST" in w.details.value and "team-a" in w.details.value
    finally:
        w.close()
    time.sleep(1)  # the poll thread ends within one interval of close()
    assert not w.poller.running


def test_describe_an_unknown_model_fails_as_one_client_error(cluster: Cluster) -> None:
    from det_jupyter.client import NotFound

    with pytest.raises(NotFound, match="not found"):
        ModelRegistryWidget(cluster.det, model="nope", live=False)
