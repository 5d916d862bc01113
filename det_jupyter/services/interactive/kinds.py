"""The kinds of interactive task, and what differs between them (pure).

Each proxied kind (reached through ``/proxy/{taskId}/``) says how it is started on its allocated
port, how the master knows it is ready, how idleness is judged, and what its config may hold.
``COMMAND`` is not proxied. A new kind is one entry here and a builder in a module of its own.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._common import NotebookSettings, notebook_entrypoint
from ._tensorboard import TensorboardSettings, tensorboard_entrypoint
from .ssh import shell_build, shell_settings

#: (task_id, bind address, port, the row's config, allow_root) -> (argv, extra environment)
Builder = Callable[[str, str, int, dict[str, Any], bool], tuple[list[str], dict[str, str]]]
#: (raw config, user name, master defaults) -> what the kind keeps in the stored config
Settings = Callable[[dict[str, Any], str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Kind:
    name: str  # the task and job type: NOTEBOOK, TENSORBOARD, SHELL
    cli: str  # what `det <cli> list` calls it
    probe: str | None  # an HTTP path under /proxy/<id>/ that answers once it is ready; None: TCP
    jupyter_idle: bool  # idle by Jupyter's kernels and terminals (else by proxy traffic only)
    settings: Settings
    build: Builder


def _notebook_settings(raw: dict[str, Any], username: str, defaults: dict[str, Any]) -> dict[str, Any]:
    nb = NotebookSettings.parse(raw, defaults.get("notebook_timeout_s"))
    return {"idle_timeout": nb.idle_timeout_s, "notebook_idle_type": nb.idle_type,
            "work_dir": nb.work_dir or f"{defaults['notebook_root']}/{username}"}


def _notebook_build(task_id: str, bind: str, port: int, cfg: dict[str, Any],
                    allow_root: bool) -> tuple[list[str], dict[str, str]]:
    env = {"NOTEBOOK_PORT": str(port), "NOTEBOOK_IDLE_TYPE": cfg.get("notebook_idle_type", "")}
    if cfg.get("hub_prefix"):  # a JupyterHub user's server, routed by the hub's proxy
        env["JUPYTERHUB_SERVICE_URL"] = f"http://{bind}:{port}{cfg['hub_prefix']}"
        return hub_entrypoint(cfg["work_dir"], allow_root), env
    return notebook_entrypoint(task_id, bind, port, cfg["work_dir"], allow_root), env


def hub_entrypoint(root_dir: str, allow_root: bool) -> list[str]:
    """``jupyterhub-singleuser`` in ``root_dir`` (made if missing): it reads where to listen,
    its prefix and its hub credentials from the JUPYTERHUB_* environment."""
    argv = ["jupyterhub-singleuser", f"--ServerApp.root_dir={root_dir}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if allow_root:
        argv.append("--ServerApp.allow_root=True")
    return ["sh", "-c", f"mkdir -p {shlex.quote(root_dir)} && exec {shlex.join(argv)}"]


def _tensorboard_settings(raw: dict[str, Any], username: str, defaults: dict[str, Any]) -> dict[str, Any]:
    return TensorboardSettings.parse(raw, defaults.get("tensorboard_timeout_s")).as_config()


def _tensorboard_build(task_id: str, bind: str, port: int, cfg: dict[str, Any],
                       allow_root: bool) -> tuple[list[str], dict[str, str]]:
    return tensorboard_entrypoint(task_id, bind, port, cfg), {"TENSORBOARD_PORT": str(port)}


KINDS: dict[str, Kind] = {
    "NOTEBOOK": Kind("NOTEBOOK", "notebook", "api/status", True, _notebook_settings, _notebook_build),
    "TENSORBOARD": Kind("TENSORBOARD", "tensorboard", "data/environment", False,
                        _tensorboard_settings, _tensorboard_build),
    "SHELL": Kind("SHELL", "shell", None, False, shell_settings, shell_build),
}


def work_dir_mounts(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """A notebook's working directory as a mount at its own path: its tasks run in a namespace
    that hides the master's data dir (where the default one lives) and may not create it
    themselves, so the agent makes it for the task's account when missing (``create``)."""
    work_dir = cfg.get("work_dir")
    if not work_dir:
        return []
    return [{"host_path": work_dir, "container_path": work_dir, "create": True}]


def proxied(task_type: str) -> bool:
    return task_type in KINDS
