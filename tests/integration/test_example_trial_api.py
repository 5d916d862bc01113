"""examples/mlp_trial_api runs as its README says: off-cluster with ``python model_def.py``, and on
a real master with each of its three configs (one trial, adaptive ASHA in epochs, two slots)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from tests._master import MasterProcess, create_experiment, wait_experiment
from tests.integration._exp import trial_log_text, trials

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp_trial_api"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed in this environment (pip install 'det-jupyter[examples]')",
)


def test_off_cluster_run_learns_and_checkpoints(tmp_path: pathlib.Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}  # stay off-cluster
    env.update({"HOME": str(tmp_path), "PYTHONWARNINGS": "ignore",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "harness"),
                                                            os.environ.get("PYTHONPATH")]))})
    proc = subprocess.run([sys.executable, "model_def.py"], cwd=EXAMPLE, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    losses = {int(m[1]): float(m[2]) for m in re.finditer(
        r"^\[validation\] step (\d+): validation_loss=([\d.]+)", proc.stdout, re.M)}
    assert sorted(losses) == [8, 16, 24], proc.stdout
    assert losses[24] < losses[8] < 1.1  # ln 3 = 1.10 is chance
    checkpoints = re.findall(r"checkpoint (\S+) at batch (\d+)", proc.stdout)
    assert [int(b) for _, b in checkpoints] == [8, 16, 24]
    for uuid, _ in checkpoints:
        assert list(tmp_path.rglob(f"{uuid}/state_dict.pth")), uuid


def test_configs_are_valid() -> None:
    from det_jupyter import config as det_config

    for name in ("const.yaml", "adaptive.yaml", "distributed.yaml"):
        cfg = det_config.parse_yaml((EXAMPLE / name).read_text())
        det_config.validate_experiment_config(cfg)
        assert cfg["entrypoint"] == "model_def:SpiralTrial"
    adaptive = yaml.safe_load((EXAMPLE / "adaptive.yaml").read_text())
    # ASHA's rungs (2, 8, 32 epochs) fall on validations (every 2 epochs).
    assert adaptive["searcher"]["time_metric"] == "epochs"
    assert adaptive["min_validation_period"] == {"epochs": 2}


@pytest.mark.slow
def test_the_three_configs_run_on_a_cluster(master: MasterProcess) -> None:
    client = master.admin()
    best = {}
    for name in ("const.yaml", "distributed.yaml", "adaptive.yaml"):
        exp_id = create_experiment(client, (EXAMPLE / name).read_text(), EXAMPLE)["experiment"]["id"]
        state = wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=300)
        ts = trials(client, exp_id)
        assert state == "STATE_COMPLETED", trial_log_text(client, ts[0]["id"])[-3000:]
        assert all(t["state"] == "STATE_COMPLETED" for t in ts)
        best[name] = min(t["searcherMetricValue"] for t in ts)
        if name == "distributed.yaml":
            ckpts = client.get(f"/api/v1/trials/{ts[0]['id']}/checkpoints")["checkpoints"]
            assert [c["metadata"]["steps_completed"] for c in ckpts] == [80]
            log = trial_log_text(client, ts[0]["id"])
            assert "det_harness.pytorch: trained 80 batches" in log
        if name == "adaptive.yaml":
            assert len(ts) == 16
            assert min(t["totalBatchesProcessed"] for t in ts) == 16  # stopped at the first rung
    assert best["const.yaml"] < 0.6 and best["adaptive.yaml"] < 0.6, best
    assert best["distributed.yaml"] < 0.8, best
