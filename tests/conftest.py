"""Shared fixtures: a real master in a subprocess, PostgreSQL when configured."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import _docker, _k8s, _wheel
from tests._master import MasterProcess

PG_DSN = os.environ.get("DET_TEST_PG_DSN")
#: Under pytest-xdist (scripts/test.sh runs two workers, ``--dist loadfile``), a module's tests
#: run on one worker (its module fixtures are made once), and so do the modules that share a
#: session resource, so it is made once: the wheel and its venv, the private Docker daemon,
#: the Kubernetes test bed (scripts/k8s/).
SHARED_RESOURCE = {
    "tests/browser/test_dashboard.py": "wheel",
    "tests/integration/test_front_door.py": "wheel",
    "tests/integration/test_docker_runtime.py": "docker",
    "tests/integration/test_docker_experiments.py": "docker",
    "tests/compat/test_docker_stock.py": "docker",
    "tests/integration/test_task_isolation.py": "docker",  # its sqlite-docker cluster
    "tests/integration/test_k8s_testbed.py": "k8s",
    "tests/integration/test_k8s_rm.py": "k8s",
    "tests/integration/test_k8s_tasks.py": "k8s",
    "tests/integration/test_k8s_isolation.py": "k8s",
    "tests/integration/test_k8s_compat.py": "k8s",
    "tests/integration/test_k8s_reasons.py": "k8s",
}

PG_SKIP = "PostgreSQL tests need DET_TEST_PG_DSN (e.g. postgresql://postgres@127.0.0.1:5432/test)"
_CREATED: list[str] = []  # databases fresh_pg_database made in this session


#: The modules (or shared groups) that take longest, started first under xdist (measured: CI's
#: --durations); a one-test module would otherwise be scheduled last and run alone.
LONGEST = ("tests/integration/test_schemathesis.py", "docker", "k8s", "wheel",
           "tests/integration/test_example_trial_api.py", "tests/integration/test_log_delivery.py",
           "tests/integration/test_priority_scenario.py", "tests/integration/test_trial_api.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """(xdist controller) ``--dist loadfile``, with the modules of ``SHARED_RESOURCE`` kept
    together by resource. (xdist's own ``loadgroup`` marks do not take on pytest 9.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModuleAndResource(LoadScopeScheduling):  # type: ignore[misc]
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SHARED_RESOURCE.get(module, module)

        def _assign_work_unit(self, node: object) -> None:
            if not self._ordered:  # the longest first: none is left to run alone at the end
                self._ordered = True
                for scope in reversed(LONGEST):
                    if scope in self.workqueue:
                        self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return ByModuleAndResource(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """(xdist controller) Tell the workers when the run began, for session-wide cleanups
    that must not remove what another worker already wrote (tests/browser's screenshots)."""
    node.workerinput["det_run_started"] = RUN_STARTED  # type: ignore[attr-defined]


RUN_STARTED = time.time()


def run_started(config: pytest.Config) -> float:
    """When this run began: the controller's start under xdist, else this process's."""
    return float(getattr(config, "workerinput", {}).get("det_run_started", RUN_STARTED))


def fresh_pg_database() -> str:
    """Create an empty database on the DET_TEST_PG_DSN server; return its URL."""
    import psycopg

    assert PG_DSN
    name = "det_test_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    _CREATED.append(name)
    base = PG_DSN.rsplit("/", 1)[0]
    return f"{base}/{name}"


@pytest.fixture(scope="session", autouse=True)
def _drop_pg_databases() -> Iterator[None]:
    """Drop the databases ``fresh_pg_database`` made, once the session ends (every test's
    master has stopped by then): a run leaves the server as it found it."""
    yield
    if not (PG_DSN and _CREATED):
        return
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for name in _CREATED:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def backend_db_url(request: pytest.FixtureRequest) -> str | None:
    """For a fixture parametrized over ["sqlite", "postgres"]: None (SQLite) or a fresh
    PostgreSQL database; skips, saying how to enable it, when PostgreSQL is not configured."""
    if request.param != "postgres":
        return None
    if not PG_DSN:
        pytest.skip(PG_SKIP)
    return fresh_pg_database()


@pytest.fixture
def task_shared_dir() -> Iterator[Path]:
    """A directory any task can read and write (mode 1777 on a traversable path). Tasks run
    as an unprivileged account that cannot enter pytest's 0700 ``tmp_path``; a test whose task
    must read a script or leave a file outside its context uses this instead."""
    path = Path(tempfile.mkdtemp(prefix="det-test-shared-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def master(tmp_path: Path) -> Iterator[MasterProcess]:
    """A running master (SQLite) with an embedded agent of 2 CPU slots."""
    m = MasterProcess(tmp_path / "master").start()
    yield m
    m.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def any_master(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MasterProcess]:
    """A running master on each database backend."""
    db_url = None
    if request.param == "postgres":
        if not PG_DSN:
            pytest.skip(PG_SKIP)
        db_url = fresh_pg_database()
    m = MasterProcess(tmp_path / "master", db_url=db_url).start()
    yield m
    m.stop()


@pytest.fixture
def bare_master(tmp_path: Path) -> Iterator[MasterProcess]:
    """A running master (SQLite) with no embedded agent: tests start ``det-agent`` processes."""
    m = MasterProcess(tmp_path / "master", extra_args=["--no-agent"]).start()
    yield m
    m.stop()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this tree, built once per session (tests._wheel)."""
    if (why := _wheel.cannot_build()) is not None:
        pytest.skip(why)
    return _wheel.build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def wheel_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment with the wheel installed, and an environment without Node."""
    return _wheel.install(wheel, tmp_path_factory.mktemp("wheel-venv"))


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[_docker.Engine]:
    """A private Docker daemon for the session, with the skeleton image (tests/_docker.py);
    skips, saying why, where none can run."""
    with _docker.private_daemon() as engine:
        yield engine


@pytest.fixture(scope="session")
def k8s_cluster() -> Iterator[_k8s.Cluster]:
    """A real single-node Kubernetes for the session (tests/_k8s.py, scripts/k8s/): built once
    and cached outside the clone, started here, stopped at the end; skips, saying how to
    enable it, where it cannot run."""
    with _k8s.k8s_cluster() as cluster:
        yield cluster
