"""The stock 0.38.1 harness in a two-slot trial: ``python -m determined.launch.torch_distributed``
reads our rendezvous info and starts two workers, and ``DistributedContext.from_torch_distributed()``
works in them (its ZMQ ports come from the master, so trials on one host do not collide).

One agent of two slots: the stock launcher names a socket ``/tmp/pid_server-<allocation>``, so two
containers of one gang must not share a host's /tmp (as in Determined, where each container has
its own); across agents on separate hosts the same rendezvous info applies, and our own launcher
is tested across two agents on one host in tests/integration/test_distributed.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests._master import MasterProcess, agent_cluster, create_experiment, wait_experiment

pytestmark = [pytest.mark.compat, pytest.mark.slow]
FIXTURE = Path(__file__).parent / "fixtures" / "ddp_stock"


@pytest.fixture
def agent_of_two(tmp_path: Path) -> Iterator[MasterProcess]:
    with agent_cluster(tmp_path, {"a": 2}) as master:
        yield master


def test_stock_launcher_and_distributed_context(det_env, agent_of_two: MasterProcess) -> None:
    client = agent_of_two.admin()
    venv_bin = Path(det_env.python).parent
    config = {
        "name": "stock-ddp",
        "entrypoint": f"{det_env.python} -m determined.launch.torch_distributed python3 train.py",
        "environment": {"environment_variables": [f"PATH={venv_bin}:/usr/local/bin:/usr/bin:/bin"]},
        "hyperparameters": {},
        "searcher": {"name": "single", "metric": "vloss", "max_length": 10},
        "resources": {"slots_per_trial": 2}, "max_restarts": 0,
    }
    exp_id = create_experiment(client, yaml.safe_dump(config), FIXTURE)["experiment"]["id"]
    state = wait_experiment(client, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
    [trial] = client.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]
    entries = client.get(f"/api/v1/trials/{trial['id']}/logs")
    messages = [e["result"]["message"] for e in entries]
    text = "".join(messages)
    assert state == "STATE_COMPLETED", text[-4000:]
    for rank in (0, 1):
        assert f"stock worker {rank} of 2: all_reduce 3.0 allgather [0, 1]" in text, text[-4000:]
        assert f"stock worker {rank} done" in text
    ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert [c["metadata"]["steps_completed"] for c in ckpts] == [5, 10]
    assert {"rank-0.json", "rank-1.json"} <= set(ckpts[-1]["resources"])
