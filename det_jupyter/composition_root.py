"""The composition root: builds the services on one database and wires them together."""

from __future__ import annotations

import logging
import os
import secrets
import uuid
from dataclasses import dataclass

import sqlalchemy as sa

from . import config as expconf
from .rm.agents import AgentRM
from .rm.config import ResourceConfig, parse_resources
from .services.access.rbac import RbacService
from .services.accounts.auth import AuthService
from .services.accounts.groups import GroupService
from .services.accounts.tokens import TokenService
from .services.accounts.users import UserService
from .services.allocation.logs import LogService
from .services.allocation.service import AllocationService
from .services.checkpoints.gc import CheckpointGC
from .services.checkpoints.service import CheckpointService
from .services.common.clock import Clock
from .services.common.sealed import Sealer, open_private, private_dir
from .services.experiments.admin import ExperimentAdmin
from .services.experiments.searcher_batch import SearcherBatcher
from .services.experiments.searcher_log import SearcherEvent
from .services.experiments.service import ExperimentService
from .services.experiments.templates import TemplateService
from .services.experiments.trials import MasterIdentity, TrialService
from .services.experiments.views import Views
from .services.interactive.commands import CommandService, OwnerRouter
from .services.interactive.notebooks import NotebookService
from .services.jobs.control import JobControl
from .services.metrics.service import MetricService
from .services.registry.models import ModelService
from .services.webhooks.service import WebhookService
from .services.workspaces.service import WorkspaceService
from .store import make_engine, migrate
from .store import tables as t

log = logging.getLogger("det_jupyter")


@dataclass(frozen=True)
class MasterSettings:
    """Everything the master needs to start; built from the extension's traits."""

    data_dir: str
    db_url: str
    url: str  # how tasks and agents reach the master, e.g. http://127.0.0.1:8080
    agent_token: str
    initial_password: str | None = None
    preemption_timeout_s: float = 3600.0
    agent_reconnect_wait_s: float = 25.0
    checkpoint_dir: str | None = None
    resources: ResourceConfig | None = None  # pools and schedulers (default: one priority pool)
    notebook_dir: str | None = None  # a user's notebooks work in <dir>/<user> (default: data dir)
    notebook_timeout_s: float | None = None  # default idle_timeout of notebooks (None: never)
    notebook_idle_check_s: float = 30.0  # seconds between looks at notebooks' activity
    tensorboard_timeout_s: float | None = 300.0  # default idle_timeout of TensorBoards
    default_user_role: str = "Editor"  # what a new user gets on Uncategorized ("" for nothing)


class Master:
    def __init__(self, settings: MasterSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or Clock()
        self.master_id = str(uuid.uuid4())
        private_dir(settings.data_dir)
        self.engine = make_engine(settings.db_url)
        migrate(self.engine)
        self.cluster_id = self._cluster_id()
        self.auth = AuthService(self.engine, self.clock)
        self.rbac = RbacService(self.engine, settings.default_user_role)
        self.models = ModelService(self.engine, self.clock, self.rbac.invalidate)
        self.workspaces = WorkspaceService(self.engine, self.clock, self.rbac, self.cluster_id,
                                           on_deleted=lambda: self._jobs_changed())
        self.experiment_admin = ExperimentAdmin(self.engine, self.rbac, self.workspaces, self.cluster_id,
                                                on_deleted=lambda: self._jobs_changed())
        self.users = UserService(self.engine, self.clock, self.auth, self.rbac)
        self.groups = GroupService(self.engine, self.rbac)
        self.tokens = TokenService(self.engine, self.clock, self.auth)
        self.templates = TemplateService(self.engine, self.rbac.invalidate)
        self.auth.on_user_created = self.rbac.on_user_created
        self.auth.on_user_changed = self.rbac.invalidate
        self.generated_password = self.auth.bootstrap(settings.initial_password)
        self._create_uncategorized()
        if self.generated_password is not None:  # a new database: admin and determined get roles
            with self.engine.begin() as conn:
                self.rbac.seed_existing_users(conn)
        ckpt_dir = settings.checkpoint_dir or os.path.join(settings.data_dir, "checkpoints")
        os.makedirs(ckpt_dir, exist_ok=True)
        if not settings.checkpoint_dir:
            # Tasks write here as their owners' accounts; like /tmp, each may remove only its
            # own. Inside the 0700 data dir, only tasks (through their bind mount) reach it.
            os.chmod(ckpt_dir, 0o1777)
        self.defaults = expconf.MasterDefaults(
            checkpoint_storage={"type": "shared_fs", "host_path": ckpt_dir}
        )
        self.logs = LogService(self.engine, self.clock)
        self.views = Views(self.engine)
        self.metrics = MetricService(self.engine, self.clock)
        self.checkpoints = CheckpointService(self.engine, self.clock)
        self.allocations = AllocationService(self.engine, self.clock, self.auth)
        self.identity = MasterIdentity(
            url=settings.url, master_id=self.master_id, cluster_id=self.cluster_id,
            preemption_timeout_s=settings.preemption_timeout_s,
        )
        self.trials = TrialService(self.engine, self.clock, self.allocations, self.identity)
        self.experiments = ExperimentService(self.engine, self.clock, self.defaults)
        self.experiments.trials = self.trials
        self.trials.experiments = self.experiments
        self.checkpoint_gc = CheckpointGC(self.engine)  # trials' and experiments' ends collect
        self.trials.on_trial_end = self.checkpoint_gc.schedule
        self.experiments.on_finished = self.checkpoint_gc.schedule
        self.searcher_batch = SearcherBatcher(self.experiments.searcher_events_many)
        self.trials.searcher_batch = self.searcher_batch  # trial exits join the same groups
        self.resources = settings.resources or parse_resources(None)
        self.experiments.resources = self.resources
        self.trials.resources = self.resources
        self.rm = AgentRM(
            self.allocations, self.logs, self.clock, resources=self.resources,
            reconnect_wait_s=settings.agent_reconnect_wait_s,
            preemption_timeout_s=settings.preemption_timeout_s,
        )
        self.jobs = JobControl(self.engine, self.resources, self._jobs_changed)
        # Replayed secrets are sealed under a key outside the database (services._sealed).
        key = load_or_create_secret(os.path.join(settings.data_dir, "secrets_key"))
        self.commands = CommandService(self.engine, self.clock, self.allocations, self.identity,
                                       sealer=Sealer(bytes.fromhex(key)))
        self.commands.seal_plaintext()  # rows written before sealing
        self.commands.resources = self.resources
        self.commands.notebook_root = settings.notebook_dir or os.path.join(settings.data_dir, "notebooks")
        self.commands.notebook_timeout_s = settings.notebook_timeout_s
        self.commands.kind_defaults["tensorboard_timeout_s"] = settings.tensorboard_timeout_s
        self.allocations.owner = OwnerRouter(self.trials, self.commands)
        self.allocations.launcher = self.rm
        self.notebooks = NotebookService(
            self.commands, self.auth, self.clock,
            load_or_create_secret(os.path.join(settings.data_dir, "proxy_secret")),
            gpu_busy=self._gpu_busy)
        self.notebooks.idle_check_interval = settings.notebook_idle_check_s
        self.notebooks.rbac = self.rbac
        self.webhooks = WebhookService(
            self.engine, self.clock, sealer=Sealer(bytes.fromhex(key)), resources=self.resources,
            signing_key=load_or_create_secret(os.path.join(settings.data_dir, "webhook_signing_key")))
        self.experiments.on_state = self.webhooks.on_state

    def _gpu_busy(self, allocation_id: str) -> bool:
        """Whether a GPU slot of the allocation is in use (its agent's last slot_stats)."""
        for agent in self.rm.describe():
            slots = agent["used"].get(allocation_id) if isinstance(agent["used"], dict) else None
            for slot in slots or []:
                stats = agent["stats"].get(slot) or {}
                if int(stats.get("gpu_util") or 0) > 0:
                    return True
        return False

    def _jobs_changed(self) -> None:
        self.allocations.invalidate()  # pending requests carry their job's settings
        self.trials.forget_configs()  # and configs mirror them
        self.rm.schedule_soon()

    def _cluster_id(self) -> str:
        with self.engine.begin() as conn:
            found = conn.execute(sa.select(t.cluster.c.cluster_id).where(t.cluster.c.id == 1)).scalar()
            if found:
                return found
            cid = str(uuid.uuid4())
            conn.execute(sa.insert(t.cluster).values(id=1, cluster_id=cid, created_at=self.clock.now()))
            return cid

    def _create_uncategorized(self) -> None:
        """The Uncategorized workspace and project (id 1) exist from the first start."""
        with self.engine.begin() as conn:
            if conn.execute(sa.select(t.workspaces.c.id).where(t.workspaces.c.id == 1)).first():
                return
            admin = conn.execute(sa.select(t.users.c.id).where(t.users.c.username == "admin")).scalar_one()
            conn.execute(sa.insert(t.workspaces).values(id=1, name="Uncategorized", immutable=True, archived=False, user_id=admin))
            conn.execute(sa.insert(t.projects).values(
                id=1, workspace_id=1, name="Uncategorized", description="", immutable=True, archived=False, user_id=admin,
                key="UNCAT", notes=[], created_at=self.clock.now(),
            ))
            if conn.dialect.name == "postgresql":  # explicit ids leave the id sequences behind
                for table in ("workspaces", "projects"):
                    conn.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                         f"COALESCE(MAX(id), 0) + 1, false) FROM {table}"))

    def start(self) -> None:
        """Recover from the last run. Call from the event loop, before serving."""
        ended = self.allocations.recover()
        for alloc in ended:
            if alloc.trial_id is None:
                self.commands.allocation_exited(alloc, None, "the master restarted while it ran")
                continue
            if alloc.task_id:
                self.logs.append_system(
                    task_id=alloc.task_id, allocation_id=alloc.allocation_id, trial_id=alloc.trial_id,
                    message="the master restarted; this run ended and the trial resumes from its latest checkpoint",
                    level="WARNING",
                )
        self.trials.recover()
        self.webhooks.start()
        for exp_id in self.experiments.active_ids():
            self.experiments.maybe_finish(exp_id)
        self.rm.schedule_soon()

    def set_url(self, url: str) -> None:
        """The URL became known once the server bound its port."""
        import dataclasses

        self.settings = dataclasses.replace(self.settings, url=url)
        self.identity = dataclasses.replace(self.identity, url=url)
        self.trials._identity = self.identity
        self.commands.identity = self.identity

    def report_metrics(self, trial_id: int, run_id: int | None, reports: list) -> None:
        """Store a trial's reports; feed new validation metrics to its searcher.

        The validations join the searcher batch (``_searcher_batch``): with the app's loop hook
        they are fed, with those of other trials, in one transaction per experiment at the next
        loop turn; without a hook, before this returns.
        """
        validations, trial = self.metrics.ingest(trial_id, run_id, reports)
        self.webhooks.on_metrics(trial_id, reports)
        if not validations:
            return
        if trial.state != "ACTIVE":
            return  # a stopping trial's late validations don't move the search
        self.searcher_batch.add(trial.experiment_id, [
            SearcherEvent("validation_completed", trial.request_id, metrics=dict(report.metrics))
            for report in validations
        ])
        self.searcher_batch.kick()

    def stop(self) -> None:
        self.searcher_batch.schedule = None
        try:
            self.searcher_batch.flush()  # validations queued for a loop turn that will not come
        finally:
            self.checkpoint_gc.stop()
            self.webhooks.stop()
            self.experiments.unmanaged.stop()
            self.engine.dispose()


def load_or_create_secret(path: str) -> str:
    """A secret kept in a 0600 file under the data dir (created on first use; an existing one
    with looser modes is tightened)."""
    if os.path.exists(path):
        os.chmod(path, 0o600)
        with open(path) as fh:
            return fh.read().strip()
    # Hex: a URL-safe token may start with "-", which `det-agent --token "$(cat …)"` would take
    # for an option.
    value = secrets.token_hex(32)
    fd = open_private(path, os.O_WRONLY | os.O_EXCL)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value
