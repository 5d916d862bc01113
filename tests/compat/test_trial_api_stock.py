"""A Trial class written for the stock determined==0.38.1 package (``from determined import
pytorch``), with Determined's ``model_def:Class`` entrypoint, runs on det-jupyter unchanged when the
task's interpreter has that package: our Trial runner hands it to the stock one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests._master import MasterProcess, create_experiment, wait_experiment
from tests.integration._exp import trial_log_text, trials

pytestmark = pytest.mark.compat
FIXTURE = Path(__file__).parent / "fixtures" / "trial_stock"


def test_stock_trial_class_completes(det_env, master: MasterProcess) -> None:
    client = master.admin()
    config = {
        "name": "stock-trial", "entrypoint": "model_def:StockTrial",
        "hyperparameters": {"global_batch_size": 16},
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True,
                     "max_length": {"batches": 12}},
        "min_validation_period": {"batches": 4}, "scheduling_unit": 2, "max_restarts": 0,
        # The task's python3 is the one with determined installed (as in Determined's images).
        "environment": {"environment_variables": [f"PATH={det_env.python.parent}:/usr/bin:/bin"]},
    }
    exp_id = create_experiment(client, yaml.safe_dump(config), FIXTURE)["experiment"]["id"]
    state = wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180)
    [trial] = trials(client, exp_id)
    assert state == "STATE_COMPLETED", trial_log_text(client, trial["id"])[-4000:]
    wl = client.get(f"/api/v1/trials/{trial['id']}/workloads")["workloads"]
    assert sorted(w["validation"]["totalBatches"] for w in wl if "validation" in w) == [4, 8, 12]
    assert sorted(w["training"]["totalBatches"] for w in wl if "training" in w) == [2, 4, 6, 8, 10, 12]
    ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert ckpts and max(c["metadata"]["steps_completed"] for c in ckpts) == 12
