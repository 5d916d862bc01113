"""The Python SDK (det_jupyter.client) against a real master with the counter trial."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from det_jupyter import client
from tests._master import ADMIN_PASSWORD, MasterProcess, wait_for
from tests.integration._exp import COUNTER, counter_config


@pytest.fixture(scope="module")
def shared_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    """One master for the module: each test makes its own experiments."""
    m = MasterProcess(tmp_path_factory.mktemp("sdk") / "master").start()
    yield m
    m.stop()


@pytest.fixture(autouse=True)
def token_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DET_JUPYTER_CONFIG_DIR", str(tmp_path / "cfg"))
    for var in ("DET_MASTER", "DET_USER", "DET_PASS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "cfg"


@pytest.fixture
def det(shared_master: MasterProcess) -> client.Determined:
    return client.Determined(shared_master.url, "admin", ADMIN_PASSWORD)


def test_login_caches_the_token_and_the_module_functions_use_it(
        shared_master: MasterProcess, token_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = client.login(shared_master.url, "admin", ADMIN_PASSWORD)
    assert d.whoami()["username"] == "admin"
    cache = json.loads((token_dir / "auth.json").read_text())
    assert cache[shared_master.url]["active"] == "admin"
    assert (token_dir / "auth.json").stat().st_mode & 0o077 == 0
    # No password: the cached token of the last user, the master from DET_MASTER.
    monkeypatch.setenv("DET_MASTER", shared_master.url)
    again = client.Determined()
    assert again.token == d.token and again.whoami()["username"] == "admin"
    assert client.master_info()["version"] == "0.38.1"
    assert client.list_agents()[0]["slots"]
    again.logout()
    with pytest.raises(client.NotLoggedIn, match="not logged in"):
        client.Determined()
    with pytest.raises(client.Unauthenticated, match="log in again"):  # the master revoked it
        client.Determined(token=d.token).whoami()
    with pytest.raises(client.Forbidden) as info:  # Determined answers a bad password with 403
        client.Determined(shared_master.url, "admin", "wrong")
    assert str(info.value) == "invalid credentials (HTTP 403)"


def test_create_wait_trials_metrics_and_top_checkpoint(det: client.Determined, tmp_path: Path) -> None:
    config = yaml.safe_load(counter_config(length=20, sleep=0.01))
    exp = det.create_experiment(config, COUNTER)
    assert exp.id > 0 and exp.name == "counter"
    seen: list[str] = []
    assert exp.wait(interval=0.3, timeout=120, on_update=lambda e: seen.append(e.state)) == "COMPLETED"
    assert seen[-1] == "COMPLETED" and exp.is_terminal

    (trial,) = exp.trials()
    assert trial.state == "COMPLETED" and trial.total_batches == 20
    assert trial.hparams["length"] == 20
    training = trial.training_metrics()
    assert [r["steps_completed"] for r in training] == list(range(1, 21))
    assert training[3]["metrics"] == {"loss": 0.25, "step": 4}
    validation = trial.validation_metrics()
    assert [r["steps_completed"] for r in validation] == [5, 10, 15, 20]
    assert validation[-1]["metrics"]["validation_loss"] == pytest.approx(1 / 20)
    json.dumps(training + validation)  # plain data

    best = exp.top_checkpoint()
    assert best is not None and best.steps_completed == 20 and best.state == "COMPLETED"
    trial_best = trial.top_checkpoint()
    assert trial_best is not None and trial_best.uuid == best.uuid
    assert {c.steps_completed for c in trial.checkpoints()} == {5, 10, 15, 20}
    dest = best.download(tmp_path / "ckpt")
    assert json.loads((dest / "state.json").read_text()) == {"step": 20}
    assert det.get_checkpoint(best.uuid).trial_id == trial.id

    lines = list(trial.logs())
    assert "run 1 starting at step 0" in lines and "done" in lines
    assert "done" in list(exp.logs())

    listed = det.list_experiments()
    assert exp.id in [e.id for e in listed]
    assert exp.id in [e.id for e in det.list_experiments(states=["COMPLETED"])]
    assert exp.id not in [e.id for e in det.list_experiments(states=["PAUSED"])]
    again = det.get_experiment(exp.id)
    assert again.state == "COMPLETED" and again.best_trial_id == trial.id


def test_pause_activate_and_kill(det: client.Determined) -> None:
    exp = det.create_experiment(counter_config(length=2000, sleep=0.05), COUNTER)
    trial = exp.wait_first_trial(timeout=60)
    assert trial is not None
    wait_for(lambda: len(trial.training_metrics()) >= 3, what="training to start")
    exp.pause()
    wait_for(lambda: exp.reload().state == "PAUSED", what="paused")
    exp.activate()
    wait_for(lambda: exp.reload().state in {"RUNNING", "ACTIVE", "QUEUED", "STARTING"},
             what="active again")
    exp.kill()
    assert exp.wait(interval=0.3, timeout=60) == "CANCELED"
    assert exp.trials()[0].state == "CANCELED"


def test_config_text_and_path_and_errors(det: client.Determined, tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(counter_config(length=2, sleep=0.0))
    from_path = det.create_experiment(str(path), COUNTER, activate=False)
    from_text = det.create_experiment(path.read_text(), COUNTER, activate=False)
    assert from_path.state == from_text.state == "PAUSED"
    for exp in (from_path, from_text):
        exp.kill()

    with pytest.raises(client.InvalidInput, match="cannot read the config file"):
        det.create_experiment(str(tmp_path / "missing.yaml"), COUNTER)
    with pytest.raises(client.InvalidInput, match="neither a readable file nor a YAML mapping"):
        det.create_experiment("no-such-file", COUNTER)
    with pytest.raises(client.InvalidInput, match="not a directory"):
        det.create_experiment(path, tmp_path / "no-such-dir")
    with pytest.raises(client.BadRequest) as bad:
        det.create_experiment({"entrypoint": "python3 train.py", "searcher": {"name": "nope"}}, COUNTER)
    assert bad.value.status == 400 and "searcher" in bad.value.message


def test_bad_ids_give_not_found_with_the_masters_message(det: client.Determined) -> None:
    with pytest.raises(client.NotFound) as info:
        det.get_experiment(987654)
    assert info.value.status == 404
    assert str(info.value) == "experiment 987654 not found (HTTP 404)"
    with pytest.raises(client.NotFound, match="trial 987654 not found"):
        det.get_trial(987654)
    assert isinstance(info.value, client.DetClientError)


def test_cluster_views(det: client.Determined) -> None:
    info = det.master_info()
    assert info["version"] == "0.38.1" and info["clusterName"]
    agents = det.list_agents()
    assert len(agents) == 1 and len(agents[0]["slots"]) == 2
    assert isinstance(det.list_jobs(), list)


def test_unreachable_master_is_one_readable_error(token_dir: Path) -> None:
    with pytest.raises(client.MasterUnreachable, match="cannot reach the master at http://127.0.0.1:9"):
        client.Determined("127.0.0.1:9", "admin", "x")
