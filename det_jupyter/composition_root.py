"""The composition root: builds the services on one database and wires them together."""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import uuid
from dataclasses import dataclass

from . import config as expconf
from .config.resources import ResourceConfig, parse_resources
from .private_files import open_private, private_dir
from .rm.agents import AgentRM
from .rm.base import ResourceManager
from .services.access.rbac import RbacService
from .services.access.resolver import AccessService
from .services.accounts.auth import AuthService
from .services.accounts.groups import GroupService
from .services.accounts.hub import HubAuth, HubOAuth, HubSync
from .services.accounts.tokens import TokenService
from .services.accounts.users import UserService
from .services.allocation.all_gather import AllGathers
from .services.allocation.logs import LogService
from .services.allocation.service import AllocationOwner, AllocationService
from .services.checkpoints.files import CheckpointFiles
from .services.checkpoints.gc import CheckpointGC
from .services.checkpoints.service import CheckpointService
from .services.cluster.config_policies import ConfigPolicies
from .services.cluster.master_logs import MasterLogs
from .services.cluster.messages import ClusterMessages
from .services.cluster.pool_bindings import Admission, PoolBindings
from .services.cluster.resource_usage import ResourceUsage
from .services.common.clock import Clock
from .services.common.identity import MasterIdentity
from .services.common.late import Late
from .services.common.sealed import Sealer
from .services.common.signal import Signal
from .services.experiments.admin import ExperimentAdmin
from .services.experiments.log_retention import LogRetention
from .services.experiments.reports import TrialReports
from .services.experiments.searcher_batch import SearcherBatcher
from .services.experiments.service import ExperimentService
from .services.experiments.submission import ExperimentSubmission
from .services.experiments.templates import TemplateService
from .services.experiments.trials import TrialService
from .services.experiments.views import Views
from .services.interactive.commands import CommandService, OwnerRouter
from .services.interactive.culler import gpu_in_use
from .services.interactive.generic import GenericTasks
from .services.interactive.notebooks import NotebookService
from .services.jobs.control import JobControl
from .services.jobs.page import JobQueuePage
from .services.metrics.service import MetricService
from .services.metrics.timeseries import TimeSeriesQuery
from .services.registry.models import ModelService
from .services.webhooks.service import WebhookService
from .services.workspaces.service import WorkspaceService
from .store import bootstrap, make_engine, migrate

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
    hub_api_url: str | None = None  # JupyterHub's API (its users' tokens are accepted)
    hub_service_token: str | None = None  # the master's own token as the hub's service
    hub_oauth: HubOAuth | None = None  # the master as the hub's OAuth client (browser sign-in)


class Master:
    """The master's services, built once from ``MasterSettings``.

    Every service gets its dependencies as constructor arguments, in the order below. Two
    construction cycles are closed by ``Late`` references bound right after the other side is
    built (experiments ⇄ trials; allocations ⇄ the resource manager and the owners of
    allocations); one fan-out, ``jobs_changed``, is a ``Signal`` whose listeners are connected
    here. Nothing is patched onto a service after it is built.
    """

    def __init__(self, settings: MasterSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock = clock or Clock()
        private_dir(settings.data_dir)
        self.engine = engine = make_engine(settings.db_url)
        migrate(engine)
        self.cluster_id = bootstrap.cluster_id(engine, clock.now())
        self.master_id = str(uuid.uuid4())
        self.identity = MasterIdentity(
            url=settings.url, master_id=self.master_id, cluster_id=self.cluster_id,
            preemption_timeout_s=settings.preemption_timeout_s,
        )
        self.resources = resources = settings.resources or parse_resources(None)
        # A job's settings or a workspace changed: pending requests carry their job's settings,
        # trials' configs mirror them, and the scheduler looks again.
        self.jobs_changed = Signal("jobs changed")

        # -- the master about itself ---------------------------------------------------------
        self.cluster_messages = ClusterMessages(engine, clock)
        self.pool_bindings = PoolBindings(engine, resources)
        self.resource_usage = ResourceUsage(engine, clock)
        self.config_policies = ConfigPolicies(engine, clock)
        self.master_logs = MasterLogs()  # attached to the det_jupyter loggers by start()

        # -- accounts and access --------------------------------------------------------------
        self.rbac = RbacService(engine, settings.default_user_role)
        self.auth = AuthService(engine, clock, on_user_created=self.rbac.on_user_created,
                                on_user_changed=self.rbac.invalidate)
        self.users = UserService(engine, clock, self.auth, self.rbac)
        self.groups = GroupService(engine, self.rbac)
        self.tokens = TokenService(engine, clock, self.auth)
        self.hub_auth = None if not settings.hub_api_url else HubAuth(
            settings.hub_api_url, settings.hub_service_token or "", self.auth,
            on_hub_user=HubSync(engine, self.auth, self.rbac), oauth=settings.hub_oauth)
        self.generated_password = self.auth.bootstrap(settings.initial_password)
        bootstrap.ensure_uncategorized(engine, clock.now())
        if self.generated_password is not None:  # a new database: admin and determined get roles
            with engine.begin() as conn:
                self.rbac.seed_existing_users(conn)

        # -- workspaces, registry, templates ------------------------------------------------
        self.models = ModelService(engine, clock, self.rbac.invalidate)
        self.workspaces = WorkspaceService(engine, clock, self.rbac, self.cluster_id,
                                           on_deleted=self.jobs_changed.fire)
        self.experiment_admin = ExperimentAdmin(engine, self.rbac, self.workspaces, self.cluster_id,
                                                on_deleted=self.jobs_changed.fire)
        self.templates = TemplateService(engine, self.rbac.invalidate)
        self.log_retention = LogRetention(engine, clock)

        # -- secrets under the data dir -----------------------------------------------------
        # Replayed secrets are sealed under a key outside the database (services.common.sealed).
        sealing_key = bytes.fromhex(load_or_create_secret(os.path.join(settings.data_dir, "secrets_key")))
        self.defaults = expconf.MasterDefaults(
            checkpoint_storage={"type": "shared_fs", "host_path": _checkpoint_root(settings)},
            container_defaults=resources.container_defaults_for)

        # -- records: logs, metrics, checkpoints, webhooks ----------------------------------
        self.logs = LogService(engine, clock)
        self.views = Views(engine)
        self.metrics = MetricService(engine, clock)
        self.checkpoints = CheckpointService(engine, clock)
        self.checkpoint_gc = CheckpointGC(engine)  # trials' and experiments' ends collect
        self.checkpoint_files = CheckpointFiles(engine)  # downloads through the master
        self.webhooks = WebhookService(
            engine, clock, sealer=Sealer(sealing_key), resources=resources,
            signing_key=load_or_create_secret(os.path.join(settings.data_dir, "webhook_signing_key")))

        # -- experiments and trials ---------------------------------------------------------
        trials_late: Late[TrialService] = Late("the experiments' trial service")
        self.experiments = ExperimentService(
            engine, clock, self.defaults, trials=trials_late, resources=resources,
            on_finished=self.checkpoint_gc.schedule, on_state=self.webhooks.on_state)
        self.searcher_batch = SearcherBatcher(self.experiments.searcher_events_many)
        owner_late: Late[AllocationOwner] = Late("the allocations' owner")
        launcher_late: Late[ResourceManager] = Late("the allocations' resource manager")
        self.allocations = AllocationService(engine, clock, self.auth, owner=owner_late,
                                             launcher=launcher_late)
        self.all_gathers = AllGathers()  # the containers' all_gather rounds (in memory)
        self.trials = TrialService(
            engine, clock, self.allocations, self.identity, experiments=self.experiments,
            searcher_batch=self.searcher_batch,  # trial exits join the validations' groups
            resources=resources, logs=self.logs, on_trial_end=self.checkpoint_gc.schedule)
        trials_late.bind(self.trials)
        self.reports = TrialReports(self.metrics, self.webhooks, self.searcher_batch)

        # -- where tasks run ----------------------------------------------------------------
        k8s = resources.kubernetes if isinstance(resources, ResourceConfig) else None
        if k8s is not None:  # resource_manager.type: kubernetes
            from .rm.kubernetes import KubeApi, KubernetesRM

            self.rm: AgentRM = KubernetesRM(
                self.allocations, self.logs, self.clock, k8s=k8s, api=KubeApi(k8s.kubeconfig_path),
                cluster_id=lambda: self.cluster_id, resources=self.resources,
                reconnect_wait_s=settings.agent_reconnect_wait_s,
                preemption_timeout_s=settings.preemption_timeout_s)
        else:
            self.rm = AgentRM(
                self.allocations, self.logs, self.clock, resources=self.resources,
                reconnect_wait_s=settings.agent_reconnect_wait_s,
                preemption_timeout_s=settings.preemption_timeout_s,
            )
        launcher_late.bind(self.rm)
        self.jobs = JobControl(engine, resources, self.jobs_changed.fire)
        self.jobs_changed.connect(self.allocations.invalidate)
        self.jobs_changed.connect(self.trials.forget_configs)
        self.jobs_changed.connect(self.rm.schedule_soon)

        # -- interactive tasks --------------------------------------------------------------
        self.commands = CommandService(
            engine, clock, self.allocations, self.identity, sealer=Sealer(sealing_key), resources=resources,
            notebook_root=settings.notebook_dir or os.path.join(settings.data_dir, "notebooks"),
            notebook_timeout_s=settings.notebook_timeout_s,
            kind_defaults={"tensorboard_timeout_s": settings.tensorboard_timeout_s},
            hub_token=settings.hub_service_token)
        self.commands.seal_plaintext()  # rows written before sealing
        self.commands.admit = Admission(self.pool_bindings, self.config_policies)
        self.generic_tasks = GenericTasks(self.commands)
        self.owners = OwnerRouter(self.trials, self.commands)
        owner_late.bind(self.owners)
        self.notebooks = NotebookService(
            self.commands, self.auth, clock,
            load_or_create_secret(os.path.join(settings.data_dir, "proxy_secret")),
            gpu_busy=lambda allocation_id: gpu_in_use(self.rm.describe(), allocation_id),
            rbac=self.rbac, idle_check_interval=settings.notebook_idle_check_s)

        # Handler-facing services (access, submission, job queue page, time series).
        self.access = AccessService(self.rbac, self.allocations, self.commands, self.views)
        self.submission = ExperimentSubmission(self.experiments, self.views, self.workspaces,
                                               self.templates, self.rm,
                                               Admission(self.pool_bindings, self.config_policies))
        self.job_queue = JobQueuePage(engine, resources, self.rm)
        self.time_series = TimeSeriesQuery(self.views, self.metrics)

    def start(self) -> None:
        """Recover from the last run. Call from the event loop, before serving."""
        self.master_logs.attach("det_jupyter")
        for alloc in self.allocations.recover(keep_placed=self.rm.adopts_running):
            self.owners.ended_by_restart(alloc)
        self.trials.recover()
        self.webhooks.start()
        for exp_id in self.experiments.active_ids():
            self.experiments.maybe_finish(exp_id)
        self.rm.schedule_soon()

    def set_url(self, url: str) -> None:
        """The URL became known once the server bound its port."""
        self.settings = dataclasses.replace(self.settings, url=url)
        self.identity.set_url(url)

    def stop(self) -> None:
        self.searcher_batch.schedule = None
        try:
            self.searcher_batch.flush()  # validations queued for a loop turn that will not come
        finally:
            self.master_logs.detach()
            self.checkpoint_gc.stop()
            self.webhooks.stop()
            self.experiments.unmanaged.stop()
            self.engine.dispose()


def _checkpoint_root(settings: MasterSettings) -> str:
    """The default checkpoint storage's directory, made on the first start."""
    ckpt_dir = settings.checkpoint_dir or os.path.join(settings.data_dir, "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    if not settings.checkpoint_dir:
        # Tasks write here as their owners' accounts; like /tmp, each may remove only its
        # own. Inside the 0700 data dir, only tasks (through their bind mount) reach it.
        os.chmod(ckpt_dir, 0o1777)
    return ckpt_dir


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
