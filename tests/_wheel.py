"""The wheel of this tree as a user gets it: built once per session (``pip wheel --no-deps``: the
build hook in setup.py builds the sidebar when needed), installed into a fresh virtual
environment whose PATH has no Node, and a master started from it with ``det-jupyter up
--detach`` (``UpMaster``). tests/conftest.py serves ``wheel`` and ``wheel_env`` as session
fixtures, so the front-door and dashboard tests share one build and one install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests._master import ADMIN_PASSWORD, REPO, Client, free_port

NODE_TOOLS = {"node", "nodejs", "npm", "npx", "corepack"}


def cannot_build() -> str | None:
    """Why no wheel with the sidebar can be built here, or ``None``."""
    if shutil.which("npm") is None and not (REPO / "det_jupyter" / "labextension" / "package.json").is_file():
        return "no npm to build the JupyterLab sidebar into the wheel, and no build of it in the tree"
    return None


def build_wheel(out: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (whl,) = out.glob("det_jupyter-*.whl")
    return whl


def path_without_node(tmp: Path) -> str:
    """PATH with every directory's programs but Node's (links in one directory)."""
    shim = tmp / "bin-no-node"
    shim.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            src = os.path.join(d, name)
            if name in NODE_TOOLS or (shim / name).exists() or not os.access(src, os.X_OK):
                continue
            if os.path.isfile(src):
                (shim / name).symlink_to(src)
    return str(shim)


def install(wheel: Path, tmp: Path) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment under ``tmp`` with ``wheel`` installed, and an environment
    (PATH without Node, a private HOME) to run its programs in."""
    venv = tmp / "venv"
    path = f"{venv / 'bin'}{os.pathsep}{path_without_node(tmp)}"
    assert shutil.which("node", path=path) is None and shutil.which("npm", path=path) is None
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "DET_MASTER")}
    env.update(PATH=path, HOME=str(tmp / "home"), JUPYTER_PLATFORM_DIRS="1")
    (tmp / "home").mkdir()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv, env


def plain(done: subprocess.CompletedProcess) -> str:
    """A command's output without its colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


class UpMaster:
    """A master run from the installed wheel by ``det-jupyter up --detach`` in ``root`` (its
    Jupyter root dir), with the admin password set through ``DET_ADMIN_PASSWORD``; ``url``,
    ``admin()`` and ``data_dir`` as tests._master.MasterProcess has them."""

    def __init__(self, venv: Path, env: dict[str, str], root: Path, *, slots: int = 1,
                 extra_env: dict[str, str] | None = None) -> None:
        self.bin = venv / "bin"
        self.root = root
        self.data_dir = root.parent / "data"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**env, "DET_ADMIN_PASSWORD": ADMIN_PASSWORD, **(extra_env or {})}
        self.slots = slots

    def start(self) -> subprocess.CompletedProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        up = subprocess.run(
            [str(self.bin / "det-jupyter"), "up", "--detach", "--port", str(self.port),
             "--data-dir", str(self.data_dir), "--slots", str(self.slots)],
            env=self.env, cwd=self.root, capture_output=True, text=True, timeout=120, check=False,
        )
        log = self.data_dir / "master.log"
        assert up.returncode == 0, up.stdout + up.stderr + (log.read_text()[-3000:] if log.exists() else "")
        return up

    def stop(self) -> None:
        subprocess.run([str(self.bin / "det-jupyter"), "down", "--data-dir", str(self.data_dir)],
                       env=self.env, capture_output=True, timeout=60, check=False)

    def login(self, username: str = "admin", password: str = ADMIN_PASSWORD) -> str:
        return Client(self.url).post("/api/v1/auth/login", {"username": username, "password": password})["token"]

    def admin(self) -> Client:
        return Client(self.url, self.login())
