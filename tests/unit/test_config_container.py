"""Issue 29: a task's container from its expanded config (0.38.1's environment, bind_mounts and
resources keys), and the refusals of what Docker could not run, at submit time."""

from __future__ import annotations

import pytest

from det_agent.wire import BindMount, Container, Device, TaskSpec
from det_jupyter import config as expconf
from det_jupyter.errors import InvalidConfig

DEFAULTS = expconf.MasterDefaults(checkpoint_storage={"type": "shared_fs", "host_path": "/tmp/ck"})
BASE = {"entrypoint": "python3 train.py", "searcher": {"name": "single", "metric": "loss", "max_length": 1}}


def _expand(**extra: object) -> dict:
    return expconf.expand_experiment_config({**BASE, **extra}, DEFAULTS, seed=1)


def test_no_image_of_its_own_is_a_process() -> None:
    assert expconf.container_for(_expand()) is None
    assert expconf.container_for(_expand(environment={"image": {"cuda": "mine:1"}}), "cpu") is None


def test_every_key_reaches_the_container() -> None:
    cfg = _expand(
        environment={"image": {"cpu": "team/cpu:2", "cuda": "team/gpu:2"}, "force_pull_image": True,
                     "add_capabilities": ["sys_ptrace"], "drop_capabilities": ["CAP_NET_RAW"],
                     "registry_auth": {"username": "u", "password": "p", "serveraddress": "r.example"}},
        bind_mounts=[{"host_path": "/data", "container_path": "/data", "read_only": True}],
        resources={"devices": ["/dev/fuse", {"host_path": "/dev/a", "container_path": "/dev/b", "mode": "r"}],
                   "shm_size": "1G"},
    )
    got = expconf.container_for(cfg, "cpu")
    assert got == Container(
        image="team/cpu:2", force_pull=True,
        registry_auth={"username": "u", "password": "p", "serveraddress": "r.example"},
        bind_mounts=(BindMount("/data", "/data", True, "rprivate"),),
        devices=(Device("/dev/fuse", "/dev/fuse", "mrw"), Device("/dev/a", "/dev/b", "r")),
        add_capabilities=("SYS_PTRACE",), drop_capabilities=("NET_RAW",), shm_size=1 << 30)
    assert expconf.container_for(cfg, "cuda").image == "team/gpu:2"
    # through the wire and back, as the agent reads it
    spec = TaskSpec("t", "t.1", "TRIAL", "true", {}, (), {}, container=got)
    assert TaskSpec.from_wire(spec.to_wire()).container == got


def test_a_master_default_image_means_containers() -> None:
    defaults = expconf.MasterDefaults(checkpoint_storage=DEFAULTS.checkpoint_storage, images={"cpu": "site/base:1"})
    cfg = expconf.expand_experiment_config(dict(BASE), defaults, seed=1)
    assert expconf.container_for(cfg).image == "site/base:1"


@pytest.mark.parametrize(("extra", "field", "words"), [
    ({"environment": {"add_capabilities": ["SYS_WIZARD"]}}, "environment.add_capabilities[0]", "unknown capability"),
    ({"environment": {"drop_capabilities": "NET_RAW"}}, "environment.drop_capabilities", "list"),
    ({"bind_mounts": [{"host_path": "data", "container_path": "/data"}]}, "bind_mounts[0].host_path", "absolute"),
    ({"bind_mounts": [{"host_path": "/d", "container_path": "/d", "propagation": "sideways"}]},
     "bind_mounts[0].propagation", "unknown propagation"),
    ({"resources": {"shm_size": "lots"}}, "resources.shm_size", "not a size"),
    ({"resources": {"devices": ["dev/fuse"]}}, "resources.devices[0]", "absolute"),
    ({"resources": {"devices": [{"host_path": "/dev/x", "mode": "rwx"}]}}, "resources.devices[0].mode", "mode"),
])
def test_what_docker_could_not_run_is_refused(extra: dict, field: str, words: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        _expand(**extra)
    assert field in str(err.value) and words in str(err.value), str(err.value)


def test_sizes() -> None:
    from det_jupyter.config._container import parse_size

    assert [parse_size(v, "x") for v in (10, "4G", "512Mi", "1.5GB", "64k")] == [
        10, 4 << 30, 512 << 20, int(1.5 * (1 << 30)), 64 << 10]
