"""The det-jupyter Python SDK, for notebooks and scripts — in the spirit of Determined's
``determined.experimental.client``, on the standard library's HTTP only.

    from det_jupyter import client
    client.login("http://127.0.0.1:8080", "admin", "…")   # or DET_MASTER + a cached token,
                                                          # or, in a det-jupyter server's
                                                          # kernel, nothing: its own identity
    exp = client.create_experiment("config.yaml", "./model_dir")
    exp.wait()
    best = exp.top_checkpoint()
    for trial in exp.trials():
        print(trial.id, trial.validation_metrics()[-1])

Every failure is a ``DetClientError``: ``APIError`` (with ``status``, and ``NotFound``,
``BadRequest``, ``Unauthenticated``, … by status), ``MasterUnreachable``, ``NotLoggedIn``,
``InvalidInput``, ``WaitTimeout``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ._client import ConfigLike, Determined, load_config
from ._errors import (
    APIError,
    BadRequest,
    Conflict,
    DetClientError,
    Forbidden,
    InvalidInput,
    MasterUnreachable,
    NotFound,
    NotLoggedIn,
    PayloadTooLarge,
    ServerError,
    Unauthenticated,
)
from ._experiment import TERMINAL_STATES, Experiment, WaitTimeout
from ._models import Model, ModelVersion
from ._tasks import Command, Notebook, Task, notebook_url
from ._trial import Checkpoint, Trial
from .session import DEFAULT_MASTER, TokenStore, master_url

__all__ = [
    "DEFAULT_MASTER", "TERMINAL_STATES", "APIError", "BadRequest", "Checkpoint", "ConfigLike",
    "Conflict", "DetClientError", "Determined", "Experiment", "Forbidden", "InvalidInput",
    "MasterUnreachable", "NotFound", "NotLoggedIn", "PayloadTooLarge", "ServerError",
    "TokenStore", "Trial", "Unauthenticated", "WaitTimeout", "create_experiment", "current",
    "get_checkpoint", "get_experiment", "get_trial", "list_agents", "list_experiments",
    "list_jobs", "load_config", "login", "master_info", "master_url",
    "Command", "Notebook", "Task", "get_command", "get_notebook", "launch_command",
    "launch_notebook", "list_commands", "list_notebooks", "notebook_url",
    "Model", "ModelVersion",
]

_default: Determined | None = None


def login(master: str | None = None, user: str | None = None,
          password: str | None = None) -> Determined:
    """Log in and make this the session the module-level functions use. ``master`` defaults
    to ``DET_MASTER``, then http://127.0.0.1:8080; without ``password`` the cached token of
    ``user`` (or of the last user logged in to that master) is used."""
    global _default
    _default = Determined(master, user, password)
    return _default


def current() -> Determined:
    """The default session: the last ``login()``'s, else a new ``login()`` with no
    arguments (the notebook server's identity, ``DET_MASTER`` and a cached token, …)."""
    return _default if _default is not None else login()


_client = current


def create_experiment(config: ConfigLike, model_dir: str | os.PathLike | None = None,
                      **kwargs: Any) -> Experiment:
    """``Determined.create_experiment`` on the default session."""
    return _client().create_experiment(config, model_dir, **kwargs)


def get_experiment(experiment_id: int) -> Experiment:
    return _client().get_experiment(experiment_id)


def list_experiments(*, states: Iterable[str] = (), name: str | None = None,
                     users: Iterable[str] = (), limit: int | None = None) -> list[Experiment]:
    return _client().list_experiments(states=states, name=name, users=users, limit=limit)


def get_trial(trial_id: int) -> Trial:
    return _client().get_trial(trial_id)


def get_checkpoint(uuid: str) -> Checkpoint:
    return _client().get_checkpoint(uuid)


def list_jobs(resource_pool: str | None = None) -> list[dict[str, Any]]:
    return _client().list_jobs(resource_pool)


def list_agents() -> list[dict[str, Any]]:
    return _client().list_agents()


def master_info() -> dict[str, Any]:
    return _client().master_info()


def launch_notebook(config: dict[str, Any] | None = None,
                    context: str | os.PathLike | None = None) -> Notebook:
    """``Determined.launch_notebook`` on the default session."""
    return _client().launch_notebook(config, context)


def launch_command(entrypoint: str | list[str], config: dict[str, Any] | None = None,
                   context: str | os.PathLike | None = None) -> Command:
    """``Determined.launch_command`` on the default session."""
    return _client().launch_command(entrypoint, config, context)


def get_notebook(task_id: str) -> Notebook:
    return _client().get_notebook(task_id)


def get_command(task_id: str) -> Command:
    return _client().get_command(task_id)


def list_notebooks(users: Iterable[str] = ()) -> list[Notebook]:
    return _client().list_notebooks(users)


def list_commands(users: Iterable[str] = ()) -> list[Command]:
    return _client().list_commands(users)
