"""Bad input gets a clear 4xx that names the problem, and nothing stored changes."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from tests._master import ApiError, Client, MasterProcess, wait_experiment, wait_for
from tests.integration._exp import counter_config, submit_counter, trials


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory):
    """One master for this module: every test checks its own before/after state."""
    m = MasterProcess(tmp_path_factory.mktemp("bad-input")).start()
    yield m
    m.stop()


def _with(**changes: object) -> str:
    cfg = yaml.safe_load(counter_config())
    for dotted, value in changes.items():
        node = cfg
        *path, last = dotted.split("__")
        for key in path:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return yaml.safe_dump(cfg)


def _experiments(client: Client) -> list[int]:
    return [e["id"] for e in client.get("/api/v1/experiments")["experiments"]]


CASES = [
    ("malformed yaml", "name: x\nsearcher: [unclosed\n", "line"),
    ("not a mapping", "- just\n- a list\n", "mapping"),
    ("unknown searcher", _with(searcher__name="asha"), "searcher.name"),
    ("removed searcher", _with(searcher__name="adaptive_simple"), "adaptive_asha"),
    ("missing metric", _with(searcher__metric=None), "metric"),
    ("asha without time_metric",
     _with(searcher={"name": "adaptive_asha", "metric": "loss", "max_trials": 4, "max_time": 10}), "time_metric"),
    ("bad hyperparameter", _with(hyperparameters__lr={"type": "double", "minval": 1.0, "maxval": 0.1}), "lr"),
    ("unknown hp type", _with(hyperparameters__lr={"type": "gaussian"}), "lr"),
    ("no entrypoint", _with(entrypoint=None), "entrypoint"),
]


@pytest.mark.parametrize(("name", "config", "word"), CASES, ids=[c[0] for c in CASES])
def test_invalid_config_is_a_400_that_names_the_problem(master: MasterProcess, name: str, config: str, word: str) -> None:
    client = master.admin()
    before = _experiments(client)
    with pytest.raises(ApiError) as err:
        client.post("/api/v1/experiments", {"config": config, "modelDefinition": []})
    assert err.value.status == 400
    message = err.value.body["message"]
    assert word in message
    assert "Traceback" not in message
    assert _experiments(client) == before


def test_oversized_context_is_a_413(master: MasterProcess) -> None:
    client = master.admin()
    before = _experiments(client)
    chunk = base64.b64encode(b"\0" * (48 * 1024 * 1024)).decode()
    files = [{"path": f"blob{i}", "type": 48, "content": chunk, "mode": 0o644, "mtime": "0", "uid": 0, "gid": 0}
             for i in range(2)]
    with pytest.raises(ApiError) as err:
        client.post("/api/v1/experiments", {"config": counter_config(), "modelDefinition": files}, timeout=120)
    assert err.value.status == 413
    assert ".detignore" in err.value.body["message"]
    assert _experiments(client) == before


def test_malformed_json_body_is_a_400(master: MasterProcess) -> None:
    client = master.admin()
    with pytest.raises(ApiError) as err:
        client.request("POST", "/api/v1/experiments", raw=b"{not json")
    assert err.value.status == 400


@pytest.mark.parametrize("header", [None, "Bearer not-a-token", "Basic abc", "Bearer "])
def test_missing_or_wrong_token_is_a_401(master: MasterProcess, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    client = Client(master.url, headers=headers)
    for method, path in [("GET", "/api/v1/experiments"), ("POST", "/api/v1/experiments"), ("GET", "/api/v1/me")]:
        with pytest.raises(ApiError) as err:
            client.request(method, path, {} if method == "POST" else None)
        assert err.value.status == 401, (method, path)


def test_wrong_password_is_a_403_and_logs_nothing_secret(master: MasterProcess) -> None:
    with pytest.raises(ApiError) as err:
        Client(master.url).post("/api/v1/auth/login", {"username": "admin", "password": "nope-CANARY"})
    assert err.value.status == 403
    assert "CANARY" not in master.log()


def test_allocation_token_works_only_for_its_own_task(master: MasterProcess, task_shared_dir: Path) -> None:
    client = master.admin()
    token_file = task_shared_dir / "token"  # the task's account cannot enter tmp_path
    mine = submit_counter(client, length=400, sleep=0.05, token_file=str(token_file))
    other = submit_counter(client, length=5)
    wait_experiment(client, other, {"STATE_COMPLETED"})
    wait_for(lambda: token_file.exists() and token_file.read_text(), what="token")
    token = token_file.read_text()
    my_trial = trials(client, mine)[0]["id"]
    other_trial = trials(client, other)[0]["id"]
    task = Client(master.url, headers={"Grpc-Metadata-x-allocation-token": f"Bearer {token}"})
    assert task.get(f"/api/v1/trials/{my_trial}")["trial"]["id"] == my_trial
    for path in [f"/api/v1/trials/{other_trial}", f"/api/v1/experiments/{other}",
                 f"/api/v1/trials/{other_trial}/checkpoints"]:
        with pytest.raises(ApiError) as err:
            task.get(path)
        assert err.value.status == 404, path
    with pytest.raises(ApiError) as err:
        task.post(f"/api/v1/trials/{other_trial}/metrics/batch", {"trialRunId": 1, "reports": []})
    assert err.value.status == 404
    for path in ["/api/v1/users", "/api/v1/experiments", "/api/v1/agents"]:
        with pytest.raises(ApiError) as err:
            task.get(path)
        assert err.value.status == 403, path
    # The token dies with its allocation.
    client.post(f"/api/v1/experiments/{mine}/kill")
    wait_experiment(client, mine, {"STATE_CANCELED"})
    with pytest.raises(ApiError) as err:
        task.get(f"/api/v1/trials/{my_trial}")
    assert err.value.status == 401


def test_verbs_on_missing_or_finished_experiments(master: MasterProcess) -> None:
    client = master.admin()
    with pytest.raises(ApiError) as err:
        client.post("/api/v1/experiments/9999/pause")
    assert err.value.status == 404
    exp = submit_counter(client, length=3)
    wait_experiment(client, exp, {"STATE_COMPLETED"})
    with pytest.raises(ApiError) as err:
        client.post(f"/api/v1/experiments/{exp}/activate")
    assert err.value.status == 409
    assert "COMPLETED" in err.value.body["message"]
    assert client.get(f"/api/v1/experiments/{exp}")["experiment"]["state"] == "STATE_COMPLETED"
