"""What ``scripts/compat_matrix.py`` runs for each stock ``det`` command, in run order.

Each case is the command's path (canonical names, as ``det --help`` lists them) and the
arguments after it, with ``{placeholders}`` filled from the scenario (ids of the objects the
script creates first). Reads come first, then creations and edits, then kills and deletes, so
a destructive command never takes away what a later one needs. ``help`` leaves are not listed:
every one is run as is.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One command to run, or the reason it is not applicable (``na``)."""

    path: str
    args: str = ""
    stdin: str | None = None
    timeout: float = 60
    expect: str | None = None  # a regex stdout+stderr must match for "works"
    na: str | None = None


def _c(path: str, args: str = "", **kw: object) -> Case:
    return Case(path, args, **kw)  # type: ignore[arg-type]


def _na(path: str, reason: str) -> Case:
    return Case(path, na=reason)


_K8S = "Kubernetes resource manager only (namespaces, quotas); det-jupyter runs no Kubernetes"
_OAUTH = "OAuth clients for SCIM provisioning: Enterprise Edition; det-jupyter has no SCIM"
_DEV = "developer tooling (raw bindings / curl against the API), not part of the user surface"
_PW = "Matrix-Passw0rd2"

CASES: list[Case] = [
    # -- not applicable -------------------------------------------------------------------
    _na("deploy", "provisions clusters on AWS/GCP/Kubernetes; det-jupyter starts with "
                  "`det-jupyter up`"),
    _na("auth login", "SSO login through an external identity provider; no SSO here"),
    _na("oauth client add", _OAUTH),
    _na("oauth client list", _OAUTH),
    _na("oauth client remove", _OAUTH),
    _na("dev auth-token", _DEV),
    _na("dev bindings call", _DEV),
    _na("dev bindings list", _DEV),
    _na("dev curl", _DEV),
    _na("master config set", "changes the Go master's log level at runtime; det-jupyter's "
                             "log level is a start-up setting"),
    _na("workspace bindings delete", _K8S),
    _na("workspace bindings list", _K8S),
    _na("workspace bindings set", _K8S),
    _na("workspace resource-quota set", _K8S),
    # -- client-side and cluster reads ----------------------------------------------------
    _c("version", expect="0.38.1"),
    _c("master info", expect="0.38.1"),
    _c("master config show"),
    _c("master logs", "--tail 5"),
    _c("auth list-providers"),
    _c("agent list", expect="{agent}"),
    _c("slot list", expect="{agent}"),
    _c("job list"),
    _c("resources aggregated", "2020-01-01 2030-12-31"),
    _c("resources allocations", "2020-01-01T00:00:00Z 2030-12-31T00:00:00Z"),
    _c("resources raw", "2020-01-01T00:00:00Z 2030-12-31T00:00:00Z"),
    _c("task list"),
    _c("task logs", "{nb} --tail 5"),
    _c("task config", "{cmd}"),
    _c("preview-search", "{steps_cfg}"),
    # -- experiments, trials, checkpoints: reads ------------------------------------------
    _c("experiment list", expect="matrix-done"),
    _c("experiment describe", "{e_done} --json", expect="matrix-done"),
    _c("experiment config", "{e_done}", expect="searcher"),
    _c("experiment list-trials", "{e_done}", expect="{t_done}"),
    _c("experiment list-checkpoints", "{e_done}", expect="{ck_done}"),
    _c("experiment logs", "{e_done} --tail 5", expect="TRIAL-DONE"),
    _c("experiment wait", "{e_done}", timeout=30),
    _c("experiment download", "{e_done} -o {work}/e-download --top-n 1"),
    _c("experiment download-model-def", "{e_done} --output-dir {work}"),
    _c("trial describe", "{t_done}", expect="{t_done}"),
    _c("trial logs", "{t_done} --tail 5", expect="TRIAL-DONE"),
    _c("trial download", "{t_done} --latest -o {work}/t-download"),
    _c("trial support-bundle", "{t_done} -o {work}"),
    _c("checkpoint describe", "{ck_done}", expect="{ck_done}"),
    _c("checkpoint download", "{ck_done} -o {work}/ck-download"),
    # -- models, workspaces, projects, users, groups, rbac, templates: reads -----------------
    _c("model list", expect="matrix-model"),
    _c("model describe", "matrix-model", expect="matrix-model"),
    _c("model list-versions", "matrix-model", expect="{ck_done}"),
    _c("workspace list", expect="matrix-ws"),
    _c("workspace describe", "matrix-ws", expect="matrix-ws"),
    _c("workspace list-projects", "matrix-ws", expect="matrix-proj"),
    _c("workspace list-members", "matrix-ws"),
    _c("workspace list-pools", "matrix-ws"),
    _c("project list", "matrix-ws", expect="matrix-proj"),
    _c("project describe", "matrix-ws matrix-proj", expect="matrix-proj"),
    _c("project list-experiments", "matrix-ws matrix-proj"),
    _c("user list", expect="matrix-user"),
    _c("user whoami", expect="admin"),
    _c("user-group list", expect="matrix-group"),
    _c("user-group describe", "matrix-group", expect="matrix-user"),
    _c("rbac list-roles", expect="Viewer"),
    _c("rbac describe-role", "Viewer"),
    _c("rbac my-permissions"),
    _c("rbac list-users-roles", "matrix-user"),
    _c("rbac list-groups-roles", "matrix-group"),
    _c("template list", expect="matrix-tpl"),
    _c("template describe", "matrix-tpl"),
    _c("config-policies describe", "experiment"),
    _c("master cluster-message get"),
    _c("token list"),
    _c("token describe", "{token_id}"),
    # -- interactive tasks: reads ---------------------------------------------------------
    _c("notebook list", expect="{nb}"),
    _c("notebook config", "{nb}"),
    _c("notebook logs", "{nb} --tail 5"),
    _c("notebook open", "{nb}"),
    _c("command list", expect="{cmd}"),
    _c("command describe", "{cmd} --json", expect="{cmd}"),
    _c("command config", "{cmd}"),
    _c("command logs", "{cmd} --tail 5"),
    _c("shell list", expect="{sh}"),
    _c("shell config", "{sh}"),
    _c("shell logs", "{sh} --tail 5"),
    _c("shell show-ssh-command", "{sh}", expect="ssh "),
    _c("shell show_ssh_command", "{sh}", expect="ssh "),
    _c("shell open", "{sh} echo MATRIX-SHELL", timeout=60, expect="MATRIX-SHELL"),
    _c("tensorboard list", expect="{tb}"),
    _c("tensorboard config", "{tb}"),
    _c("tensorboard logs", "{tb} --tail 5"),
    _c("tensorboard open", "{tb}"),
    # -- creations and edits --------------------------------------------------------------
    _c("experiment create", "{steps_cfg} {steps_dir}", timeout=90, expect="Created experiment"),
    _c("experiment label add", "{e_done} matrix-label"),
    _c("experiment label remove", "{e_done} matrix-label"),
    _c("experiment set description", "{e_done} 'set by the matrix'"),
    _c("experiment set name", "{e_done} matrix-done-renamed"),
    _c("experiment set log-retention", "{e_done} --days 30"),
    _c("experiment archive", "{e_done}"),
    _c("experiment unarchive", "{e_done}"),
    _c("experiment pause", "{e_live}"),
    _c("experiment activate", "{e_live}"),
    _c("experiment set priority", "{e_live} 10"),
    _c("experiment set weight", "{e_live} 2"),
    _c("experiment set max-slots", "{e_live} 1"),
    _c("experiment set gc-policy", "{e_spare} --save-experiment-best 1 --save-trial-best 1 "
                                   "--save-trial-latest 1 --yes"),
    _c("experiment delete-tb-files", "{e_spare}"),
    _c("experiment move", "{e_spare} matrix-ws matrix-proj"),
    _c("experiment continue", "{e_other} --config searcher.max_length=12 -f", timeout=120,
       expect="TRIAL-DONE"),
    _c("trial set log-retention", "{t_done} --days 30"),
    _c("job update", "{job_live} -p 20"),
    _c("job update-batch", "{job_live}.priority=30"),
    _c("model create", "matrix-model-2 --description 'made by the matrix'"),
    _c("model register-version", "matrix-model {ck_done_first}"),
    _c("model move", "matrix-model-2 -w matrix-ws"),
    _c("workspace create", "matrix-ws-2", expect="matrix-ws-2"),
    _c("workspace edit", "matrix-ws-2 --name matrix-ws-3"),
    _c("workspace archive", "matrix-ws-3"),
    _c("workspace unarchive", "matrix-ws-3"),
    _c("project create", "matrix-ws matrix-proj-2 --description 'made by the matrix'"),
    _c("project edit", "matrix-ws matrix-proj-2 --description edited"),
    _c("project archive", "matrix-ws matrix-proj-2"),
    _c("project unarchive", "matrix-ws matrix-proj-2"),
    _c("resource-pool bindings add", "{bind_pool} matrix-ws"),
    _c("resource-pool bindings list-workspaces", "{bind_pool}"),
    _c("resource-pool bindings replace", "{bind_pool} matrix-ws"),
    _c("resource-pool bindings remove", "{bind_pool} matrix-ws"),
    _c("user create", "matrix-user-2 --password Matrix-Passw0rd1"),
    _c("user edit", "matrix-user-2 --display-name 'Matrix Two'"),
    _c("user link-with-agent-user", "matrix-user-2 --agent-uid 1000 --agent-gid 1000 "
                                    "--agent-user matrix --agent-group matrix"),
    _c("user change-password", "matrix-user-2", stdin=f"{_PW}\n{_PW}\n"),
    _c("user deactivate", "matrix-user-2"),
    _c("user activate", "matrix-user-2"),
    _c("user rename", "matrix-user-2 matrix-user-3"),
    _c("user login", "admin", stdin="{admin_password}\n"),
    _c("user-group create", "matrix-group-2"),
    _c("user-group add-user", "matrix-group-2 admin"),
    _c("user-group remove-user", "matrix-group-2 admin"),
    _c("user-group change-name", "matrix-group-2 matrix-group-3"),
    _c("rbac assign-role", "Viewer -u matrix-user -w matrix-ws"),
    _c("rbac unassign-role", "Viewer -u matrix-user -w matrix-ws"),
    _c("template create", "matrix-tpl-2 {tpl_file}"),
    _c("template set", "matrix-tpl-2 {tpl_file}"),
    _c("template set-value config", "matrix-tpl-2 {tpl_file}"),
    _c("config-policies set", "experiment {policy_file}"),
    _c("master cluster-message set", "-m 'maintenance (set by the matrix)'"),
    _c("master cluster-message clear"),
    _c("token create", "matrix-user --description 'made by the matrix'"),
    _c("token edit", "{token_id} --description edited"),
    _c("token login", "{token}"),
    _c("notebook set priority", "{nb} 10"),
    _c("command set priority", "{cmd} 10"),
    _c("shell set priority", "{sh} 10"),
    _c("tensorboard set priority", "{tb} 10"),
    _c("command run", "--config resources.slots=0 echo MATRIX-CMD", timeout=90,
       expect="MATRIX-CMD"),
    _c("notebook start", "--config resources.slots=0 --no-browser", timeout=120),
    _c("shell start", "-d --config resources.slots=0", timeout=60, expect="[0-9a-f]+-[0-9a-f]+-[0-9a-f]+-"),
    _c("tensorboard start", "{e_done} --no-browser", timeout=120),
    _c("task create", "{task_file}", timeout=60),
    _c("task fork", "{gt}"),
    _c("task pause", "{gt}"),
    _c("task unpause", "{gt}"),
    _c("task cleanup-logs"),
    # -- kills and deletes ----------------------------------------------------------------
    _c("experiment cancel", "{e_paused_a}"),
    _c("experiment kill", "{e_paused_b}"),
    _c("trial kill", "{t_live}"),
    _c("experiment delete", "{e_spare} --yes", timeout=90),
    _c("checkpoint delete", "{ck_other_a} --yes"),
    _c("checkpoint rm", "{ck_other_b} --glob state.json --yes"),
    _c("task kill", "{cmd_b}"),
    _c("command kill", "{cmd}"),
    _c("notebook kill", "{nb}"),
    _c("shell kill", "{sh}"),
    _c("tensorboard kill", "{tb}"),
    _c("config-policies delete", "experiment"),
    _c("template remove", "matrix-tpl-2"),
    _c("model delete", "matrix-model-2"),
    _c("project delete", "matrix-ws matrix-proj-2 --yes"),
    _c("workspace delete", "matrix-ws-3 --yes", timeout=90),
    _c("user-group delete", "matrix-group-3 --yes"),
    _c("token revoke", "{token_id}"),
    _c("slot disable", "{agent} 1"),
    _c("slot enable", "{agent} 1"),
    _c("agent disable", "{agent} --drain"),
    _c("agent enable", "{agent}"),
    _c("user logout"),
]
