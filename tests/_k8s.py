"""A real single-node Kubernetes (1.20.2) for tests, started and stopped by scripts/k8s/.

``k8s_cluster()`` (the session fixture of the same name in tests/conftest.py) runs
``scripts/k8s/build.sh`` (a no-op once the build is cached in ``DET_K8S_HOME``, by default
``~/.cache/det-jupyter/k8s-1.20.2``; ~9 min cold on 2 cores; with ``DET_K8S_BUILD=0`` it
only checks for a cached build), then ``up.sh``, yields a ``Cluster`` and runs ``down.sh`` at
the end. A cluster that is already up (a developer ran
``up.sh``) is used as it is and left running. It skips, saying how to enable it, without root,
bash or the ``kubernetes`` client, or when the build fails; a build that is there but will not
start fails the test, with the end of up.sh's output.

What the pods get (scripts/k8s/up.sh): no CNI, kube-proxy or DNS; ``hostNetwork: true`` for a
network; local images only (busybox:1.35, k8s.gcr.io/pause:3.2, local/hostusr:1), more
through ``docker load`` on ``Cluster.docker_host``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts" / "k8s"
K8S_VERSION = "1.20.2"
BUILD_TIMEOUT = 1800.0  # cold: ~9 min on 2 cores; a slow mirror adds to it
UP_TIMEOUT = 300.0
DOWN_TIMEOUT = 120.0
ENABLE = "run `bash scripts/k8s/build.sh` as root (scripts/test.sh does)"


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A running test bed: ``kubeconfig`` (admin), ``home`` (DET_K8S_HOME), ``docker_host``
    (the private dockerd the kubelet drives: ``DOCKER_HOST=... docker load`` adds images),
    ``node`` (the one node's name) and ``api_server`` (its https URL on 127.0.0.1)."""

    kubeconfig: Path
    home: Path
    docker_host: str
    node: str
    api_server: str

    def core_v1(self) -> Any:
        """A ``kubernetes.client.CoreV1Api`` on this cluster."""
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        return client.CoreV1Api(api)


def default_home() -> Path:
    """``DET_K8S_HOME``, or the default of scripts/k8s/common.sh."""
    configured = os.environ.get("DET_K8S_HOME")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "det-jupyter" / f"k8s-{K8S_VERSION}"


def why_no_cluster() -> str | None:
    """Why no test bed can run here (before any build), or None."""
    if os.geteuid() != 0:
        return f"the Kubernetes test bed needs root (a private dockerd and a kubelet); {ENABLE}"
    if shutil.which("bash") is None:
        return "the Kubernetes test bed's scripts need bash"
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        return "the kubernetes Python client is not installed (.venv/bin/pip install -e '.[test]')"
    return None


def read_endpoints(home: Path) -> Cluster | None:
    """The cluster described by ``run/endpoints`` (written by up.sh once ready), if its
    apiserver's recorded process is alive; None otherwise."""
    run = home / "run"
    try:
        fields = dict(line.split("=", 1) for line in (run / "endpoints").read_text().splitlines() if "=" in line)
        pid = int((run / "pids" / "kube-apiserver").read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return Cluster(kubeconfig=Path(fields["KUBECONFIG"]), home=home, docker_host=fields["DOCKER_HOST"],
                   node=fields["NODE"], api_server=fields["API_SERVER"])


def _script(name: str, timeout: float, arg: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run scripts/k8s/NAME [ARG]; a failure or a timeout is returned, never raised."""
    argv = ["bash", str(SCRIPTS / name), *([arg] if arg else [])]
    try:
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return subprocess.CompletedProcess(exc.cmd, 124, out, err + f"\n(timed out after {timeout:g} s)")


def _tail(proc: subprocess.CompletedProcess[str], lines: int = 15) -> str:
    return "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-lines:])


@contextlib.contextmanager
def k8s_cluster() -> Iterator[Cluster]:
    """Build (if not cached), start, yield and stop the test bed (see the module's docstring)."""
    reason = why_no_cluster()
    if reason:
        pytest.skip(reason)
    home = default_home()
    running = read_endpoints(home)
    if running is not None:  # someone's up.sh: use it, and leave it up
        yield running
        return
    # DET_K8S_BUILD=0 (scripts/test.sh sets it when its build failed): a cached build or none.
    cached_only = os.environ.get("DET_K8S_BUILD") == "0"
    build = _script("build.sh", BUILD_TIMEOUT, "--check" if cached_only else None)
    if build.returncode != 0:
        pytest.skip(f"no Kubernetes test bed: scripts/k8s/build.sh{' --check' if cached_only else ''} "
                    f"failed (exit {build.returncode}); {ENABLE}:\n{_tail(build)}")
    up = _script("up.sh", UP_TIMEOUT)
    try:
        cluster = read_endpoints(home) if up.returncode == 0 else None
        if cluster is None:
            pytest.fail(f"scripts/k8s/up.sh did not start the cluster (exit {up.returncode}; "
                        f"logs in {home / 'logs'}):\n{_tail(up)}")
        yield cluster
    finally:
        down = _script("down.sh", DOWN_TIMEOUT)
    if down.returncode != 0:  # something is left behind on the host: say so loudly
        raise RuntimeError(f"scripts/k8s/down.sh failed (exit {down.returncode}):\n{_tail(down)}")


def free_cpus(cluster: Cluster) -> float:
    """The node's allocatable CPUs less what its live pods request (other tests' pods, when
    tests share the test bed): what a master with no pods of its own there turns into slots."""
    from det_jupyter.rm._kube_api import quantity_value

    core = cluster.core_v1()
    node = core.read_node(cluster.node)
    free = quantity_value(node.status.allocatable["cpu"])
    for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={cluster.node}").items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for c in pod.spec.containers:
            requests = (c.resources.requests or {}) if c.resources is not None else {}
            free -= quantity_value(str(requests.get("cpu", "0")))
    return free


def lent_pod_spec(site_packages: str) -> dict[str, Any]:
    """A ``cpu_pod_spec`` for ``local/hostusr:1`` pods that run this checkout: the host's /usr
    (Debian's python3), the checkout and the test venv's ``site_packages`` lent read-only at
    /opt/det (on the task's PYTHONPATH too), ``hostNetwork`` to reach the master on 127.0.0.1
    (the test bed has no CNI)."""
    # Each package is lent on its own: a checkout's root may be private (``mktemp -d`` makes
    # it 0700), and the pods' unprivileged user could not read through it.
    packages = {"det-agent": REPO / "det_agent", "det-jupyter": REPO / "det_jupyter",
                "det-harness": REPO / "harness" / "det_harness"}
    return {"spec": {
        "hostNetwork": True,
        "containers": [{
            "name": "determined-container",
            "env": [{"name": "PYTHONPATH", "value": "/opt/det/src:/opt/det/site"}],
            "volumeMounts": [{"name": "usr", "mountPath": "/usr", "readOnly": True},
                             *({"name": name, "mountPath": f"/opt/det/src/{path.name}", "readOnly": True}
                               for name, path in packages.items()),
                             {"name": "site", "mountPath": "/opt/det/site", "readOnly": True}],
        }],
        "volumes": [{"name": "usr", "hostPath": {"path": "/usr"}},
                    *({"name": name, "hostPath": {"path": str(path)}} for name, path in packages.items()),
                    {"name": "site", "hostPath": {"path": site_packages}}],
    }}


@contextlib.contextmanager
def namespace(cluster: Cluster, prefix: str = "det-test") -> Iterator[str]:
    """A namespace of the caller's own, deleted at the end."""
    import secrets

    core = cluster.core_v1()
    name = f"{prefix}-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name)


#: The test venv's site-packages, lent to the pods (lent_pod_spec).
SITE = next((p for p in site.getsitepackages() if p.startswith(sys.prefix)), site.getsitepackages()[0])


@contextlib.contextmanager
def k8s_master(cluster: Cluster, work: Path, namespace: str, **rm: Any) -> Iterator[Any]:
    """A master with ``resource_manager: {type: kubernetes}`` on ``cluster`` in ``namespace``
    (``rm``: more of its keys), no agent, its pods ``local/hostusr:1`` with this checkout lent
    (lent_pod_spec); stopped at the end."""
    import yaml

    from tests._master import MasterProcess

    cfg = {"resource_manager": {"type": "kubernetes", "default_namespace": namespace,
                                "kubeconfig_path": str(cluster.kubeconfig), "slot_type": "cpu", **rm},
           "task_container_defaults": {"image": "local/hostusr:1", "cpu_pod_spec": lent_pod_spec(SITE)}}
    (work / "master.yaml").write_text(yaml.safe_dump(cfg))
    master = MasterProcess(work / "data", extra_args=["--no-agent", "--config", str(work / "master.yaml")]).start()
    try:
        yield master
    finally:
        master.stop()
