"""``Determined``: one logged-in session with a master, and what it can list and create."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from det_jupyter.identity import load_identity

from ._errors import InvalidInput, NotLoggedIn
from ._experiment import Experiment
from ._models import ModelMethods
from ._tasks import TaskMethods
from ._trial import Checkpoint, Trial
from ._workspaces import WorkspaceMethods
from .session import Session, TokenStore, master_url

ConfigLike = dict[str, Any] | str | os.PathLike


def load_config(config: ConfigLike) -> str:
    """Experiment config as YAML text, from a dict, a YAML file's path or YAML text."""
    if isinstance(config, dict):
        return yaml.safe_dump(config, sort_keys=False)
    if isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config
                                            and (os.path.isfile(config) or config.endswith((".yaml", ".yml")))):
        try:
            text = Path(config).read_text()
        except OSError as exc:
            raise InvalidInput(f"cannot read the config file {os.fspath(config)}: "
                               f"{exc.strerror or exc}") from None
    elif isinstance(config, str):
        text = config
    else:
        raise InvalidInput(f"config must be a dict, YAML text or a path, not {type(config).__name__}")
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(f"the config is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(parsed, dict):
        if isinstance(config, str) and "\n" not in config.strip():
            raise InvalidInput(f"config {config!r} is neither a readable file nor a YAML mapping")
        raise InvalidInput("the config must be a YAML mapping (name:, entrypoint:, searcher:, …)")
    return text


def context_files(model_dir: str | os.PathLike | None,
                  includes: Iterable[str | os.PathLike] = ()) -> list[dict[str, Any]]:
    """The context directory as the master takes it (``v1File`` list, ``.detignore`` kept)."""
    if model_dir is None:
        return []
    from det_jupyter.config import read_context_dir  # the master's own packing rules
    from det_jupyter.errors import DetError

    try:
        return read_context_dir(os.fspath(model_dir), [os.fspath(i) for i in includes])
    except DetError as exc:
        raise InvalidInput(exc.message) from None
    except OSError as exc:
        raise InvalidInput(f"cannot read the context directory {os.fspath(model_dir)}: "
                           f"{exc.strerror or exc}") from None


class Determined(TaskMethods, WorkspaceMethods, ModelMethods):
    """A session with a det-jupyter (or Determined 0.38.1) master.

    Credentials, first that applies: ``token``; ``password`` (logs in and caches the token);
    ``DET_PASS`` with ``user``/``DET_USER``; in a kernel of a Jupyter server that runs the
    det-jupyter extension, the server's identity (``det_jupyter.identity``: its master and
    user, when ``master``/``user`` name no other); inside a task (a notebook, a JupyterHub
    server, a command), its owner's token (``DET_USER_TOKEN`` for ``DET_USER`` at
    ``DET_MASTER``), as the stock client does; else the cached token of ``user`` (or of the
    last user who logged in to this master). Raises ``NotLoggedIn`` when none applies.
    """

    def __init__(self, master: str | None = None, user: str | None = None,
                 password: str | None = None, *, token: str | None = None,
                 store: TokenStore | None = None) -> None:
        ident = load_identity()
        if ident is not None and master is None and not os.environ.get("DET_MASTER"):
            master = ident.master
        self.master = master_url(master)
        self._store = store or TokenStore()
        self._session = Session(self.master)
        user = user or os.environ.get("DET_USER") or None
        if password is None and token is None and user and os.environ.get("DET_PASS"):
            password = os.environ["DET_PASS"]
        if token is not None:
            self._session.token = token
        elif password is not None:
            self._login(user or "determined", password)
        elif (ident is not None and ident.master == self.master
              and user in (None, ident.username)):
            self._session.token = ident.token
            user = ident.username
        elif (task := _task_credentials(self.master, user)) is not None:
            self._session.token, user = task
        else:
            user = user or self._store.active_user(self.master)
            cached = self._store.token(self.master, user) if user else None
            if cached is None:
                # A master that does not answer says so first ("cannot reach the master at
                # URL"): logging in would not help.
                self._session.get("/api/v1/master")
                who = f" as {user}" if user else ""
                raise NotLoggedIn(f"not logged in to {self.master}{who}; run `det user login` "
                                  "or call login(user=..., password=...)")
            self._session.token = cached
        self.username = user

    def _login(self, user: str, password: str) -> None:
        body = self._session.post("/api/v1/auth/login", {"username": user, "password": password})
        self._session.token = body["token"]
        self._store.save(self.master, user, body["token"])

    @property
    def token(self) -> str | None:
        return self._session.token

    # -- users and the master -----------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """The logged-in user (``v1User``: id, username, admin, active, …)."""
        return self._session.get("/api/v1/me")["user"]

    def logout(self) -> None:
        """End the session on the master and forget the cached token."""
        try:
            self._session.post("/api/v1/auth/logout")
        finally:
            if self.username:
                self._store.drop(self.master, self.username)
            self._session.token = None

    def master_info(self) -> dict[str, Any]:
        """The master's ``/api/v1/master`` (version, cluster id and name, …)."""
        return self._session.get("/api/v1/master")

    # -- experiments --------------------------------------------------------------------

    def create_experiment(self, config: ConfigLike, model_dir: str | os.PathLike | None = None,
                          *, includes: Iterable[str | os.PathLike] = (),
                          activate: bool = True, template: str | None = None) -> Experiment:
        """Submit an experiment: ``config`` as a dict, YAML text or a YAML file's path;
        ``model_dir`` the context directory uploaded with it (``.detignore`` honoured,
        ≤ 95 MiB); ``includes`` extra files or directories added at the context's root.
        The result's ``launch_warnings`` holds the master's warnings (e.g.
        ``LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED``: more slots than the pool has; it waits).
        ``template`` names a config template the master merges in (the merged config is kept)."""
        text = load_config(config)
        files = context_files(model_dir, includes)
        request: dict[str, Any] = {"config": text, "modelDefinition": files, "activate": activate}
        if template:
            request["template"] = template
        body = self._session.post("/api/v1/experiments", request)
        exp = body["experiment"]
        out = Experiment(self._session, exp["id"], exp)
        out.launch_warnings = [str(w) for w in body.get("warnings") or []]
        return out

    def validate_experiment(self, config: ConfigLike, model_dir: str | os.PathLike | None = None,
                            *, includes: Iterable[str | os.PathLike] = (),
                            template: str | None = None) -> None:
        """Have the master check a config and context without creating anything
        (``validateOnly``, what ``det e create --test`` starts with); ``BadRequest`` says
        what is wrong."""
        request: dict[str, Any] = {"config": load_config(config),
                                   "modelDefinition": context_files(model_dir, includes),
                                   "validateOnly": True}
        if template:
            request["template"] = template
        self._session.post("/api/v1/experiments", request)

    def get_experiment(self, experiment_id: int) -> Experiment:
        """The experiment; ``NotFound`` if there is none with that id."""
        return Experiment(self._session, int(experiment_id))

    def list_experiments(self, *, states: Iterable[str] = (), name: str | None = None,
                         users: Iterable[str] = (), limit: int | None = None,
                         newest_first: bool = False, archived: bool | None = None,
                         offset: int | None = None, labels: Iterable[str] = ()) -> list[Experiment]:
        """Experiments, oldest first (or ``newest_first``); ``states`` like ``"RUNNING"``;
        ``archived`` False hides archived ones, True lists only those, None both; ``labels``:
        only those that carry every one."""
        params: dict[str, Any] = {
            "states": ["STATE_" + s.upper().removeprefix("STATE_") for s in states] or None,
            "users": list(users) or None, "name": name, "limit": limit, "offset": offset or None,
            "orderBy": "ORDER_BY_DESC" if newest_first else None,
            "archived": None if archived is None else str(archived).lower(),
            "labels": list(labels) or None,
        }
        body = self._session.request("GET", "/api/v1/experiments", params=params)
        return [Experiment(self._session, e["id"], e) for e in body.get("experiments") or []]

    def preview_search(self, config: dict[str, Any]) -> dict[str, Any]:
        """The training plan of ``config`` without creating anything (``det preview-search``):
        ``{"config": the searcher section with its defaults, "trials": [{"count", "unit"}]}``."""
        return dict(self._session.post("/api/v1/preview-hp-search", {"config": config})["summary"])

    def cleanup_logs(self) -> int:
        """Delete the logs of ended trials past their retention (cluster admins); how many
        log lines went."""
        return int(self._session.post("/api/v1/cleanup_logs")["removedCount"])

    def fork_experiment(self, experiment_id: int, config: dict[str, Any],
                        *, activate: bool = True) -> Experiment:
        """A new experiment with ``config`` and the context directory of experiment
        ``experiment_id`` (what ``det e fork`` does; the parent is left as it is)."""
        import io
        import tarfile
        import tempfile

        parent = self.get_experiment(experiment_id)
        tgz = parent.model_def_tgz()
        with tempfile.TemporaryDirectory(prefix="det-fork-") as tmp:
            with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:*") as tar:
                tar.extractall(tmp, filter="data")
            return self.create_experiment(config, tmp, activate=activate)

    def continue_experiment(self, experiment_id: int,
                            override_config: dict[str, Any] | str | None = None) -> Experiment:
        """Train a finished experiment on (what ``det e continue`` does): ``override_config``
        (a mapping or YAML text, e.g. ``{"searcher": {"max_length": {"batches": 40}}}``) is
        merged onto its config, and its trial resumes from its latest checkpoint. Only a
        single-trial experiment takes an override; a grid or random search that did not
        complete re-runs its unfinished trials. ``BadRequest``/``Conflict`` say why not."""
        if override_config is None:
            text = "{}"
        elif isinstance(override_config, str):
            text = override_config
        else:
            text = yaml.safe_dump(override_config, sort_keys=False)
        body = self._session.post("/api/v1/experiments/continue",
                                  {"id": int(experiment_id), "overrideConfig": text})
        exp = body["experiment"]
        return Experiment(self._session, exp["id"], exp)

    def task_logs(self, task_id: str, *, follow: bool = False) -> Iterator[str]:
        """Any task's log lines (a TensorBoard's, a command's, …), without the newline."""
        params = {"follow": "true"} if follow else None
        for entry in self._session.stream(f"/api/v1/tasks/{quote(task_id, safe='')}/logs", params,
                                          timeout=None if follow else 120):
            yield str(entry.get("message") or entry.get("log") or "").rstrip("\n")

    def get_trial(self, trial_id: int) -> Trial:
        """The trial; ``NotFound`` if there is none with that id."""
        return Trial(self._session, int(trial_id))

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        """The checkpoint; ``NotFound`` if there is none with that uuid."""
        return Checkpoint(self._session, self._session.get(f"/api/v1/checkpoints/{uuid}")["checkpoint"])

    # -- the cluster --------------------------------------------------------------------

    def list_jobs(self, resource_pool: str | None = None) -> list[dict[str, Any]]:
        """The job queue of a pool (the default compute pool if none): ``v1Job`` dicts in
        queue order, with ``summary.jobsAhead`` and, for a queued job, ``waitReason``."""
        body = self._session.get("/api/v1/job-queues-v2", **({"resourcePool": resource_pool}
                                                             if resource_pool else {}))
        return [j.get("full") or j for j in body.get("jobs") or []]

    def update_job(self, job_id: str, *, priority: int | None = None, weight: float | None = None,
                   resource_pool: str | None = None, ahead_of: str | None = None,
                   behind_of: str | None = None) -> None:
        """Change a queued job (``POST /api/v1/job-queues``, what ``det job update`` does):
        its priority, fair-share weight or pool, or move it just ahead of / behind another job."""
        update: dict[str, Any] = {"jobId": job_id, "priority": priority, "weight": weight,
                                  "resourcePool": resource_pool, "aheadOf": ahead_of,
                                  "behindOf": behind_of}
        update = {k: v for k, v in update.items() if v is not None}
        if len(update) < 2:
            raise InvalidInput("update_job needs one of priority, weight, resource_pool, "
                               "ahead_of, behind_of")
        self._session.post("/api/v1/job-queues", {"updates": [update]})

    def list_models(self) -> list[dict[str, Any]]:
        """Registered models (``v1Model`` dicts; ``search_models`` gives ``Model`` objects).
        ``NotFound`` from a master without a model registry."""
        return self._session.get("/api/v1/models").get("models") or []

    def list_agents(self) -> list[dict[str, Any]]:
        """Connected agents (``v1Agent`` dicts: id, slots, resourcePools, enabled, …)."""
        return self._session.get("/api/v1/agents").get("agents") or []

    def set_agent_enabled(self, agent_id: str, enabled: bool, *, drain: bool = False) -> dict[str, Any]:
        """Enable an agent, or disable it: its tasks are killed, or with ``drain`` left to
        finish while nothing new is placed there (``det agent enable|disable [--drain]``)."""
        action = "enable" if enabled else "disable"
        body = {"drain": True} if drain and not enabled else {}
        return self._session.post(f"/api/v1/agents/{agent_id}/{action}", body) or {}

    def set_slot_enabled(self, agent_id: str, slot_id: str, enabled: bool) -> dict[str, Any]:
        """Enable or disable one slot of an agent (``det slot enable|disable``)."""
        action = "enable" if enabled else "disable"
        return self._session.post(f"/api/v1/agents/{agent_id}/slots/{slot_id}/{action}", {}) or {}

    def list_resource_pools(self) -> list[dict[str, Any]]:
        """Resource pools (``v1ResourcePool`` dicts)."""
        return self._session.get("/api/v1/resource-pools").get("resourcePools") or []


def _task_credentials(master: str, user: str | None) -> tuple[str, str] | None:
    """``(token, username)`` of the task this process runs in, when ``master`` is its master
    and ``user`` (if named) its owner; else None."""
    env = os.environ
    token, owner, at = env.get("DET_USER_TOKEN"), env.get("DET_USER"), env.get("DET_MASTER")
    if not token or not owner or not at or master_url(at) != master or user not in (None, owner):
        return None
    return token, owner
