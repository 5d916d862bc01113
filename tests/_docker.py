"""A private Docker daemon for tests, and a base image made without a registry.

``docker_engine`` (a session fixture: import ``docker_engine_fixture`` into a test module) starts ``dockerd`` with
its own data, exec root and socket under a short temporary directory (no iptables, no bridge:
containers use the host's network or none), imports ``det-skel:1`` (an empty root file
system with /etc/passwd and /etc/group; bind the host's /usr read-only to run its programs),
and stops the daemon and removes its directories at the end of the session. It skips, naming
what is missing, when dockerd or the docker SDK is absent or the daemon cannot start (it
needs root).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._master import MasterProcess, start_agent

SKELETON = "det-skel:1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


@dataclasses.dataclass(frozen=True)
class Engine:
    """A running private daemon: ``host`` is its DOCKER_HOST, ``image`` the skeleton's name."""

    host: str
    image: str
    root: str

    def api(self):  # noqa: ANN201 - docker.APIClient, untyped
        import docker

        return docker.APIClient(base_url=self.host, version="auto", timeout=60)


def why_no_docker() -> str | None:
    """Why no private daemon can run here, or None."""
    if shutil.which("dockerd") is None and not os.path.exists("/usr/sbin/dockerd"):
        return "dockerd is not installed (apt-get install docker.io)"
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the docker Python SDK is not installed (.venv/bin/pip install 'docker>=7')"
    if os.geteuid() != 0:
        return "starting a private dockerd needs root; run the Docker tests as root"
    return None


def skeleton_tar() -> bytes:
    """An image root: empty usr, tmp, run, proc, sys, dev, etc with the host's passwd and
    group, and bin/lib/lib64 linked into usr (as Debian's merged /usr). sbin is a directory
    of its own: the engine binds its init at /sbin/docker-init, which must not land in a
    /usr the tests bind read-only from the host."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("usr", "tmp", "run", "proc", "sys", "dev", "etc", "sbin"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        for name in ("passwd", "group"):
            with open(f"/etc/{name}", "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(f"etc/{name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for name in ("bin", "lib", "lib64"):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, f"usr/{name}"
            tar.addfile(info)
    return buf.getvalue()


def _stop(proc: subprocess.Popen[bytes], pidfile: str) -> None:
    """Stop the daemon this module started (by its own pid, never by name)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    with contextlib.suppress(OSError):
        os.unlink(pidfile)


def _unmount_under(root: str) -> None:
    """Lazily unmount what the daemon left mounted under ``root`` (its netns file)."""
    with open("/proc/self/mounts", encoding="utf-8") as f:
        points = [line.split()[1] for line in f]
    for point in sorted((p for p in points if p.startswith(root + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@contextlib.contextmanager
def private_daemon() -> Iterator[Engine]:
    """Start a private dockerd, import the skeleton image, yield the engine, stop it."""
    reason = why_no_docker()
    if reason:
        pytest.skip(reason)
    import docker

    root = tempfile.mkdtemp(prefix="dk", dir="/tmp")  # short: a socket path has ~100 chars
    sock, pidfile = f"{root}/docker.sock", f"{root}/pid"
    log = open(f"{root}/dockerd.log", "wb")  # noqa: SIM115 - closed below
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    proc = subprocess.Popen(
        [dockerd, "--iptables=false", "--ip-forward=false", "--bridge=none",
         "--data-root", f"{root}/root", "--exec-root", f"{root}/exec", "-H", f"unix://{sock}",
         "--pidfile", pidfile],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    host = f"unix://{sock}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                with open(f"{root}/dockerd.log", "rb") as f:
                    tail = f.read()[-1500:].decode(errors="replace")
                pytest.skip(f"a private dockerd could not start (exit {proc.returncode}): {tail}")
            try:
                api = docker.APIClient(base_url=host, version="auto", timeout=10)
                api.ping()
                break
            except docker.errors.DockerException:
                if time.monotonic() > deadline:
                    pytest.skip(f"a private dockerd did not answer within {START_TIMEOUT:g} s")
                time.sleep(0.2)
        repo, tag = SKELETON.split(":")
        api.import_image_from_data(skeleton_tar(), repository=repo, tag=tag)
        api.close()
        yield Engine(host, SKELETON, root)
    finally:
        _stop(proc, pidfile)
        log.close()
        _unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)


def docker_master(engine: Engine, data_dir: Path, *, slots: int = 2) -> MasterProcess:
    """A started master whose embedded agent runs the Docker runtime on ``engine``."""
    return MasterProcess(data_dir, slots=slots, env={"DOCKER_HOST": engine.host},
                         extra_args=["--runtime", "docker"]).start()


def docker_agent(master: MasterProcess, engine: Engine, work: Path, agent_id: str, *, slots: int = 1,
                 extra: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """A ``det-agent`` process of the Docker runtime on ``engine`` (id ``agent_id``, work dir
    and log under ``work``), connected to ``master`` with its agent token."""
    return start_agent(master, work, agent_id, slots=slots, extra=("--runtime", "docker", *extra),
                       env={"DOCKER_HOST": engine.host})


def lend_site_packages() -> tuple[str, str | None]:
    """The test venv's site-packages, and why it cannot be lent to the skeleton image's
    /usr/bin/python3 (another minor version) or None. An image would have its packages
    installed; the skeleton borrows ours through PYTHONPATH and a read-only bind mount."""
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    debian = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"],
                            capture_output=True, text=True, check=False).stdout.strip()
    if debian != str(sys.version_info[:2]):
        return site, (f"the image's /usr/bin/python3 is {debian or 'missing'}, the test venv's packages "
                      f"are for {sys.version_info[:2]}: they cannot be lent to it")
    return site, None
