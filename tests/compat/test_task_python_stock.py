"""Issue 27 item 5: a stock Determined config (``entrypoint: python3 train.py``) runs unmodified
when the agent names the Python environment its tasks run (``det-jupyter up --task-python``,
``det-agent --task-python``): here the venv holding the stock ``determined==0.38.1``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests._master import MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


@pytest.mark.parametrize("named", [True, False], ids=["task-python", "the-master's-python"])
def test_a_stock_config_runs_unmodified_in_the_named_environment(det_env, tmp_path: Path, named: bool) -> None:
    extra = ["--task-python", str(det_env.python.parent.parent)] if named else []
    master = MasterProcess(tmp_path / "master", extra_args=extra).start()
    try:
        client = master.admin()
        config = yaml.safe_load(f.steps_config(det_env.python, name="stock-python3", length=5))
        config["entrypoint"] = "python3 train.py"  # as a Determined user wrote it
        exp_id = create_experiment(client, yaml.safe_dump(config), f.STEPS_DIR)["experiment"]["id"]
        trial = f.only_trial(client, exp_id)
        state = f.wait_state(client, exp_id, TERMINAL, timeout=90)
        log = f.log_text(client, trial["id"])
        if named:
            assert state == "STATE_COMPLETED", log[-3000:]
            assert f.steps_of(client, trial["id"], "training") == [1, 2, 3, 4, 5]
        else:  # the master's own interpreter has no `determined`: why it could not run before
            assert state == "STATE_ERROR" and "No module named 'determined'" in log, log[-3000:]
    finally:
        master.stop()


def test_a_task_python_without_python3_is_refused_at_start(tmp_path: Path) -> None:
    master = MasterProcess(tmp_path / "master", extra_args=["--task-python", str(tmp_path)])
    with pytest.raises(RuntimeError) as err:
        master.start()
    assert "no python3 there" in str(err.value) or "no python3 there" in master.log()
