"""The master's services: orchestration between the HTTP layer and the store.

Services own I/O, the clock and the background loops; the pure policies they drive live in
``det_jupyter.scheduler`` and ``det_jupyter.searcher``. ``det_jupyter.composition_root`` builds
every service with its dependencies; ``det_jupyter.server_ext`` handlers call them. Each domain
is a subpackage whose ``__init__`` names its public modules (``_x`` modules are private to it):

==============  ==========================================================================
domain          owns
==============  ==========================================================================
``common``      what every domain shares: clock, states and transitions, sealed secrets,
                the master's identity, ``Late`` (closes construction cycles), ``Signal``
``cluster``     the master about itself: the cluster-wide message, its own log, its
                configuration as admins see it
``accounts``    users, passwords, session/user/access tokens, groups
``access``      roles, permissions and role assignments (who may do what, where)
``workspaces``  workspaces and projects
``experiments`` experiments, trials, the searcher loop and its durable log, templates,
                unmanaged (core_v2) runs, the read models of experiments and trials
``jobs``        the job queue: reading it and editing priority, weight, position
``checkpoints`` reported checkpoints, their lists, and garbage collection
``metrics``     metric ingestion, summaries, series and charts
``allocation``  allocations (one run of a task on slots), gangs, task specs, task logs
``interactive`` notebooks, TensorBoards, commands and shells; the proxy's origin; the idle
                culler
``registry``    the model registry (models and their versions)
``webhooks``    webhook definitions, payloads and their delivery
==============  ==========================================================================

Each domain's docstring says which other domains it depends on. No ``__init__`` imports its
submodules (that would tie the domains into import cycles): import the module you need, e.g.
``from det_jupyter.services.experiments.service import ExperimentService``.
"""

__all__ = [
    "access",
    "accounts",
    "allocation",
    "checkpoints",
    "cluster",
    "common",
    "experiments",
    "interactive",
    "jobs",
    "metrics",
    "registry",
    "webhooks",
    "workspaces",
]
