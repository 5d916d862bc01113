"""The one route table of the det REST API (paths are joined to Jupyter's base_url)."""

from __future__ import annotations

from typing import Any

from . import _auth, _cluster, _commands, _experiments, _jobs, _lab, _tasks, _trials
from ._base import NotFoundHandler

_ID = r"(\d+)"
_TASK = r"([^/]+)"

ROUTES: list[tuple[str, Any]] = [
    (r"/info", _auth.InfoHandler),
    (r"/det-jupyter/session", _lab.LabSessionHandler),
    (r"/agents", _cluster.AgentSocket),
    (r"/api/v1/master", _auth.MasterHandler),
    (r"/api/v1/auth/login", _auth.LoginHandler),
    (r"/api/v1/auth/logout", _auth.LogoutHandler),
    (r"/api/v1/me", _auth.MeHandler),
    (r"/api/v1/users", _auth.UsersHandler),
    (r"/api/v1/users/([^/]+)/by-username", _auth.UserByNameHandler),
    (r"/api/v1/experiments", _experiments.ExperimentsHandler),
    (rf"/api/v1/experiments/{_ID}", _experiments.ExperimentHandler),
    (rf"/api/v1/experiments/{_ID}/(activate|pause|cancel|kill)", _experiments.ExperimentVerbHandler),
    (rf"/api/v1/experiments/{_ID}/trials", _experiments.ExperimentTrialsHandler),
    (rf"/api/v1/experiments/{_ID}/checkpoints", _experiments.ExperimentCheckpointsHandler),
    (rf"/api/v1/experiments/{_ID}/searcher/best_searcher_validation_metric", _experiments.BestValidationHandler),
    (rf"/api/v1/experiments/{_ID}/model_def", _experiments.ModelDefHandler),
    (r"/api/v1/trials/time-series", _trials.TimeSeriesHandler),
    (rf"/api/v1/trials/{_ID}", _trials.TrialHandler),
    (rf"/api/v1/trials/{_ID}/kill", _trials.TrialKillHandler),
    (rf"/api/v1/trials/{_ID}/metrics", _trials.TrialMetricsHandler),
    (rf"/api/v1/trials/{_ID}/metrics/batch", _trials.TrialMetricsBatchHandler),
    (rf"/api/v1/trials/{_ID}/progress", _trials.TrialProgressHandler),
    (rf"/api/v1/trials/{_ID}/early_exit", _trials.TrialEarlyExitHandler),
    (rf"/api/v1/trials/{_ID}/runner/metadata", _trials.TrialRunnerMetadataHandler),
    (rf"/api/v1/trials/{_ID}/checkpoints", _trials.TrialCheckpointsHandler),
    (rf"/api/v1/trials/{_ID}/workloads", _trials.TrialWorkloadsHandler),
    (rf"/api/v1/trials/{_ID}/logs", _trials.TrialLogsHandler),
    (r"/api/v1/runs/start", _trials.RunsStartHandler),
    (rf"/api/v1/runs/{_ID}/metadata", _trials.RunMetadataHandler),
    (rf"/api/v1/tasks/{_TASK}/context_directory", _tasks.TaskContextHandler),
    (rf"/api/v1/tasks/{_TASK}/logs", _tasks.TaskLogsHandler),
    (r"/api/v1/task/logs", _tasks.PostTaskLogsHandler),
    (rf"/api/v1/allocations/{_TASK}/signals/preemption", _tasks.PreemptionSignalHandler),
    (rf"/api/v1/allocations/{_TASK}/signals/ack_preemption", _tasks.AckPreemptionHandler),
    (rf"/api/v1/allocations/{_TASK}/(ready|waiting|acceleratorData|proxy_address|notify_container_running)",
     _tasks.AllocationNoopHandler),
    (rf"/api/v1/allocations/{_TASK}/resources/{_TASK}/rendezvous", _tasks.RendezvousHandler),
    (rf"/api/v1/allocations/{_TASK}/all_gather", _tasks.AllGatherHandler),
    (r"/api/v1/checkpoints", _tasks.CheckpointsHandler),
    (r"/api/v1/checkpoints/([0-9a-fA-F-]+)", _tasks.CheckpointHandler),
    (r"/api/v1/agents", _cluster.AgentsHandler),
    (r"/api/v1/agents/([^/]+)", _cluster.AgentHandler),
    (r"/api/v1/agents/([^/]+)/(enable|disable)", _cluster.AgentEnableHandler),
    (r"/api/v1/agents/([^/]+)/slots/([^/]+)/(enable|disable)", _cluster.SlotEnableHandler),
    (r"/api/v1/tasks", _cluster.TasksHandler),
    (r"/api/v1/det-jupyter/scheduler-stats", _cluster.SchedulerStatsHandler),
    (r"/api/v1/job-queues", _jobs.JobQueueUpdateHandler),
    (r"/api/v1/commands", _commands.CommandsHandler),
    (r"/api/v1/commands/([^/]+)", _commands.CommandHandler),
    (r"/api/v1/commands/([^/]+)/kill", _commands.CommandKillHandler),
    (r"/api/v1/commands/([^/]+)/set_priority", _commands.CommandPriorityHandler),
    (r"/api/v1/resource-pools", _cluster.ResourcePoolsHandler),
    (r"/api/v1/job-queues-v2", _jobs.JobQueueHandler),
    (r"/api/v1/.*", NotFoundHandler),
]
