"""DetSpawner's own logic (the spawn itself is tests/integration/test_jupyterhub.py): the det
notebook config it asks for, its spawn form, its patience in the queue, its state; and the
master's check of what a spawner sends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("jupyterhub", reason="DetSpawner needs jupyterhub (pip install -e '.[test]')")

from det_jupyter.errors import InvalidRequest  # noqa: E402
from det_jupyter.hub import DetSpawner  # noqa: E402
from det_jupyter.services.interactive.commands import HubServer  # noqa: E402

PROFILES = [
    {"slug": "cpu", "display_name": "CPU", "config": {"resources": {"slots": 0}}},
    {"slug": "gpu", "display_name": "One <GPU>", "description": "for training",
     "config": {"resources": {"slots": 1}, "environment": {"image": "team/gpu:1"}}},
]


def spawner(**traits: object) -> DetSpawner:
    return DetSpawner(user=SimpleNamespace(name="alice", url="/user/alice/"), **traits)


def test_the_config_is_the_profile_over_the_defaults() -> None:
    s = spawner(profiles=PROFILES, image="team/cpu:1", resource_pool="hub", priority=30,
                notebook_config={"idle_timeout": "1h", "resources": {"slots": 4}})
    s.user_options = {"profile": "gpu"}
    assert s._config() == {
        "idle_timeout": "1h", "description": "JupyterHub server of alice",
        "resources": {"slots": 1, "resource_pool": "hub", "priority": 30},
        "environment": {"image": "team/gpu:1"},
    }
    s.user_options = {}  # no choice: the first profile
    assert s._config()["resources"]["slots"] == 0
    assert s._config()["environment"] == {"image": "team/cpu:1"}


def test_the_form_offers_the_profiles_escaped() -> None:
    form = spawner(profiles=PROFILES).options_form
    assert 'value="cpu" checked' in form and "One &lt;GPU&gt;" in form and "for training" in form
    assert spawner(profiles=PROFILES[:1]).options_form == ""  # nothing to choose
    assert spawner().options_from_form({"profile": ["gpu"]}) == {"profile": "gpu"}


def test_waiting_in_the_queue_is_not_a_spawn_timeout() -> None:
    s = spawner()
    assert s.start_timeout >= 24 * 3600 and s.det_start_timeout == 300


def test_the_state_survives_a_hub_restart() -> None:
    s = spawner()
    s.task_id, s.api_token = "t-1", "server-token"
    state = s.get_state()
    again = spawner()
    again.load_state(state)
    assert (again.task_id, again.api_token) == ("t-1", "server-token")
    again.clear_state()
    assert again.task_id is None


@pytest.mark.parametrize(("prefix", "env"), [
    ("user/alice/", {}), ("/user/alice", {}), ("/user//alice/", {}),
    ("/user/alice/", {"A=B": "x"}), ("/user/alice/", {"A": 1}),
])
def test_the_master_refuses_a_malformed_hub_server(prefix: str, env: dict) -> None:
    with pytest.raises(InvalidRequest):
        HubServer(prefix, env)
