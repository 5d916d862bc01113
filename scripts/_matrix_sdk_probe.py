"""Calls every public method of the stock SDK (``determined==0.38.1``) against a master.

Run by ``scripts/compat_matrix.py`` with the stock venv's python:
``python _matrix_sdk_probe.py SCENARIO.json``. The scenario names the master, the admin's
password and the objects already made (ids, names, config files). The methods are found with
``inspect`` (module functions of ``determined.experimental.client`` and the public methods of
its classes); each is called once, in the order of ``PROBES`` below, and one JSON line per
method goes to stdout: ``{"owner", "name", "status": works|fails|n/a, "note", "detail"}``.
This file imports only the stock client, never det-jupyter.
"""

from __future__ import annotations

import inspect
import json
import signal
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from typing import Any

warnings.simplefilter("ignore")

from determined.common.experimental.resource_pool import ResourcePool  # noqa: E402
from determined.experimental import client  # noqa: E402

CLASSES = ["Determined", "Experiment", "Trial", "Checkpoint", "Model", "ModelVersion",
           "Workspace", "Project", "User", "ResourcePool", "Oauth2ScimClient"]
_OAUTH = "OAuth clients for SCIM provisioning: Enterprise Edition; det-jupyter has no SCIM"
_PACH = "Pachyderm integration: reads Pachyderm settings/commits; no Pachyderm here"
NA = {
    "add_oauth_client": _OAUTH, "list_oauth_clients": _OAUTH, "remove_oauth_client": _OAUTH,
    "get_pachyderm_config": _PACH, "get_pachyderm_commit": _PACH,
}


class Blocked(Exception):
    """A probe needs an object an earlier probe failed to make."""


class TimedOut(Exception):
    pass


def surface() -> list[tuple[str, str]]:
    """Every (owner, method) the SDK offers: ``client`` module functions, then class methods."""
    out = [("client", n) for n, f in inspect.getmembers(client, inspect.isfunction)
           if not n.startswith("_") and f.__module__.startswith("determined")]
    for cls_name in CLASSES:
        cls = getattr(client, cls_name)
        out += [(cls_name, n) for n, _ in inspect.getmembers(cls, inspect.isfunction)
                if not n.startswith("_")]
    return out


class Probe:
    """Ordered calls; ``got`` keeps what earlier calls returned for later ones."""

    def __init__(self, sc: dict[str, Any]) -> None:
        self.sc = sc
        self.got: dict[str, Any] = {}
        self.results: dict[tuple[str, str], dict[str, str]] = {}
        self.tmp = tempfile.mkdtemp(prefix="sdk-probe-", dir=sc["work"])

    def need(self, key: str) -> Any:
        if key not in self.got:
            raise Blocked(f"blocked: an earlier call did not produce {key}")
        return self.got[key]

    def call(self, owner: str, name: str, fn: Callable[[], Any], *, keep: str | None = None,
             check: Callable[[Any], bool] | None = None, timeout: int = 60) -> None:
        if (owner, name) in self.results:
            return
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(timeout)
        try:
            value = fn()
            if inspect.isgenerator(value) or type(value).__name__ in ("map", "filter"):
                value = list(value)
            signal.alarm(0)
            if check is not None and not check(value):
                self.record(owner, name, "fails", f"returned an implausible value: {value!r}"[:200])
                return
            if keep:
                self.got[keep] = value
            self.record(owner, name, "works", "")
        except Blocked as exc:
            signal.alarm(0)
            self.record(owner, name, "fails", str(exc))
        except BaseException as exc:  # noqa: BLE001 - every failure is a result
            signal.alarm(0)
            if isinstance(exc, KeyboardInterrupt):
                raise
            first = (str(exc).strip().splitlines() or [""])[0]
            detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.record(owner, name, "fails", f"{type(exc).__name__}: {first}"[:300],
                        detail[-2000:])

    def record(self, owner: str, name: str, status: str, note: str, detail: str = "") -> None:
        row = {"owner": owner, "name": name, "status": status, "note": note, "detail": detail}
        self.results[(owner, name)] = row
        print(json.dumps(row), flush=True)


def _alarm(signum: int, frame: Any) -> None:
    raise TimedOut("no answer within the probe's time limit")


def api_probes(p: Probe, owner: str, api: Any, tag: str) -> None:
    """The ``Determined`` surface, on ``client`` (module functions) or a ``Determined``."""
    sc = p.sc
    k = f"{tag}_"
    p.call(owner, "whoami", lambda: api.whoami(), keep=k + "me",
           check=lambda u: u.username == "admin")
    p.call(owner, "get_session_username", lambda: api.get_session_username(),
           check=lambda n: n == "admin")
    p.call(owner, "list_users", lambda: api.list_users(),
           check=lambda us: any(u.username == "matrix-user" for u in us))
    p.call(owner, "get_user_by_name", lambda: api.get_user_by_name("matrix-user"),
           check=lambda u: u.username == "matrix-user")
    p.call(owner, "get_user_by_id", lambda: api.get_user_by_id(p.need(k + "me").user_id),
           check=lambda u: u.username == "admin")
    p.call(owner, "create_user", lambda: api.create_user(f"sdk-{tag}-user", admin=False,
                                                         password="Sdk-Passw0rd1"),
           keep=k + "user")
    p.call(owner, "list_workspaces", lambda: api.list_workspaces(),
           check=lambda ws: any(w.name == "matrix-ws" for w in ws))
    p.call(owner, "get_workspace", lambda: api.get_workspace("matrix-ws"), keep=k + "ws")
    p.call(owner, "create_workspace", lambda: api.create_workspace(f"sdk-{tag}-ws"))
    p.call(owner, "list_experiments", lambda: api.list_experiments(),
           check=lambda es: any(str(e.id) == sc["e_done"] for e in es))
    p.call(owner, "get_experiment", lambda: api.get_experiment(int(sc["e_done"])),
           keep=k + "exp")
    p.call(owner, "create_experiment",
           lambda: api.create_experiment(sc["steps_cfg"], sc["steps_dir"]),
           keep=k + "new_exp", timeout=120)
    p.call(owner, "get_trial", lambda: api.get_trial(int(sc["t_done"])), keep=k + "trial")
    p.call(owner, "get_checkpoint", lambda: api.get_checkpoint(sc["ck_done"]),
           keep=k + "ck", check=lambda c: c.uuid == sc["ck_done"])
    # client.create_model takes no labels; Determined.create_model does.
    labels = {} if owner == "client" else {"labels": ["sdk"]}
    p.call(owner, "create_model", lambda: api.create_model(f"sdk-{tag}-model", **labels),
           keep=k + "model")
    p.call(owner, "get_model", lambda: api.get_model("matrix-model"), keep=k + "mm")
    p.call(owner, "get_model_by_id", lambda: api.get_model_by_id(p.need(k + "mm").model_id))
    p.call(owner, "get_models", lambda: api.get_models(),
           check=lambda ms: any(m.name == "matrix-model" for m in ms))
    p.call(owner, "list_models", lambda: api.list_models(),
           check=lambda ms: any(m.name == "matrix-model" for m in ms))
    trial_ids = [int(sc["t_done"])]
    p.call(owner, "iter_trials_metrics", lambda: api.iter_trials_metrics(trial_ids, "training"),
           check=bool)
    p.call(owner, "stream_trials_metrics",
           lambda: api.stream_trials_metrics(trial_ids, "validation"), check=bool)
    p.call(owner, "stream_trials_training_metrics",
           lambda: api.stream_trials_training_metrics(trial_ids), check=bool)
    p.call(owner, "stream_trials_validation_metrics",
           lambda: api.stream_trials_validation_metrics(trial_ids), check=bool)


def _made(p: Probe, key: str, make: Callable[[], Any]) -> Callable[[], Any]:
    """A getter for an object made on first use; a failure to make it blocks its callers."""
    def get() -> Any:
        if key not in p.got:
            try:
                p.got[key] = make()
            except Blocked:
                raise
            except Exception as exc:  # noqa: BLE001
                raise Blocked(f"blocked: could not make {key}: {type(exc).__name__}: "
                              f"{str(exc)[:150]}") from None
        return p.got[key]
    return get


def experiment_probes(p: Probe, d: Any) -> None:
    sc = p.sc
    exp = d.get_experiment(int(sc["e_done"]))
    call = p.call
    call("Experiment", "reload", exp.reload)
    call("Experiment", "get_trials", exp.get_trials, check=lambda ts: len(ts) == 1)
    call("Experiment", "list_trials", exp.list_trials, check=lambda ts: len(ts) == 1)
    call("Experiment", "iter_trials", exp.iter_trials, check=lambda ts: len(ts) == 1)
    call("Experiment", "await_first_trial", exp.await_first_trial, timeout=30)
    call("Experiment", "list_checkpoints", exp.list_checkpoints, check=lambda cs: len(cs) >= 1)
    call("Experiment", "top_checkpoint", exp.top_checkpoint,
         check=lambda c: c.uuid == sc["ck_done"])
    call("Experiment", "top_n_checkpoints", lambda: exp.top_n_checkpoints(2),
         check=lambda cs: len(cs) >= 1)
    call("Experiment", "download_code", lambda: exp.download_code(f"{p.tmp}/code"))
    call("Experiment", "add_label", lambda: exp.add_label("sdk-label"))
    call("Experiment", "remove_label", lambda: exp.remove_label("sdk-label"))
    call("Experiment", "set_labels", lambda: exp.set_labels({"a", "b"}))
    call("Experiment", "set_description", lambda: exp.set_description("set by the SDK probe"))
    call("Experiment", "set_name", lambda: exp.set_name("matrix-done-sdk"))
    call("Experiment", "set_notes", lambda: exp.set_notes("notes from the SDK probe"))
    call("Experiment", "archive", exp.archive)
    call("Experiment", "unarchive", exp.unarchive)
    call("Experiment", "delete_tensorboard_files", exp.delete_tensorboard_files)
    call("Experiment", "wait", lambda: exp.wait(interval=0.5), timeout=30,
         check=lambda s: s.name == "COMPLETED")
    # Long-running experiments for the state changes, each ended by the call it serves.
    def live(key: str) -> Callable[[], Any]:
        return _made(p, key, lambda: d.create_experiment(sc["live_cfg"], sc["steps_dir"]))
    live_a, live_b, live_c = live("live_a"), live("live_b"), live("live_c")
    call("Experiment", "pause", lambda: live_a().pause())
    call("Experiment", "activate", lambda: live_a().activate())
    call("Experiment", "kill", lambda: live_a().kill())
    call("Experiment", "cancel", lambda: live_b().cancel())
    call("Trial", "kill", lambda: live_c().await_first_trial().kill(), timeout=90)
    short = lambda: p.need("det_new_exp")  # noqa: E731
    call("Experiment", "move_to_project", lambda: short().move_to_project("matrix-ws",
                                                                          "matrix-proj"))
    try:
        p.got["det_new_exp"].wait(interval=0.5)
    except Exception:  # noqa: BLE001 - delete below reports what is wrong
        pass
    call("Experiment", "delete", lambda: short().delete(), timeout=90)


def trial_probes(p: Probe, d: Any) -> None:
    sc = p.sc
    tr = d.get_trial(int(sc["t_done"]))
    call = p.call
    call("Trial", "reload", tr.reload)
    call("Trial", "get_experiment", tr.get_experiment, check=lambda e: str(e.id) == sc["e_done"])
    call("Trial", "get_checkpoints", tr.get_checkpoints, check=lambda cs: len(cs) >= 1)
    call("Trial", "list_checkpoints", tr.list_checkpoints, check=lambda cs: len(cs) >= 1)
    call("Trial", "top_checkpoint", tr.top_checkpoint, check=lambda c: c.uuid == sc["ck_done"])
    call("Trial", "select_checkpoint", lambda: tr.select_checkpoint(latest=True),
         check=lambda c: c.uuid == sc["ck_done"])
    call("Trial", "logs", lambda: tr.logs(tail=5), check=bool)
    call("Trial", "iter_logs", lambda: tr.iter_logs(tail=5), check=bool)
    call("Trial", "iter_metrics", lambda: tr.iter_metrics("training"), check=bool)
    call("Trial", "stream_metrics", lambda: tr.stream_metrics("validation"), check=bool)
    call("Trial", "stream_training_metrics", tr.stream_training_metrics, check=bool)
    call("Trial", "stream_validation_metrics", tr.stream_validation_metrics, check=bool)


def _spare_checkpoints(p: Probe) -> list[Any]:
    """The checkpoints of the experiment ``client.create_experiment`` made (nothing else
    needs them), once it has ended."""
    exp = p.need("client_new_exp")
    exp.wait(interval=0.5)
    return [c for t in exp.list_trials() for c in t.list_checkpoints()]


def checkpoint_probes(p: Probe, d: Any) -> None:
    sc = p.sc
    ck = d.get_checkpoint(sc["ck_done"])
    call = p.call
    call("Checkpoint", "reload", ck.reload)
    call("Checkpoint", "add_metadata", lambda: ck.add_metadata({"sdk": {"probe": 1}}))
    call("Checkpoint", "remove_metadata", lambda: ck.remove_metadata(["sdk"]))
    call("Checkpoint", "download", lambda: ck.download(f"{p.tmp}/ck"))
    call("Checkpoint", "write_metadata_file", lambda: ck.write_metadata_file(f"{p.tmp}/m.json"))
    def linked_metrics() -> Any:
        # What core_context.experimental.report_task_using_checkpoint() records: a trial that
        # used the checkpoint (here the finished trial itself), whose metrics get_metrics reads.
        from determined.common.api import bindings as b

        info = b.v1TrialSourceInfo(checkpointUuid=ck.uuid, trialId=int(sc["t_done"]),
                                   trialSourceInfoType=b.v1TrialSourceInfoType.INFERENCE)
        b.post_ReportTrialSourceInfo(d._session, body=b.v1ReportTrialSourceInfoRequest(trialSourceInfo=info))
        return ck.get_metrics()

    call("Checkpoint", "get_metrics", linked_metrics, check=bool)
    spare = _made(p, "spare_cks", lambda: _spare_checkpoints(p))
    call("Checkpoint", "remove_files", lambda: _pick(spare(), 0).remove_files(["state.json"]),
         timeout=90)
    call("Checkpoint", "delete", lambda: _pick(spare(), -1).delete())


def _pick(items: list[Any], i: int) -> Any:
    if not items:
        raise Blocked("blocked: the experiment made by client.create_experiment has no "
                      "checkpoint")
    return items[i]


def model_probes(p: Probe, d: Any) -> None:
    sc = p.sc
    call = p.call
    m = d.get_model("matrix-model")
    call("Model", "reload", m.reload)
    call("Model", "get_version", m.get_version, check=lambda v: v is not None)
    call("Model", "get_versions", m.get_versions, check=bool)
    call("Model", "list_versions", m.list_versions, check=bool)
    call("Model", "add_metadata", lambda: m.add_metadata({"sdk": 1}))
    call("Model", "remove_metadata", lambda: m.remove_metadata(["sdk"]))
    call("Model", "set_description", lambda: m.set_description("set by the SDK probe"))
    call("Model", "set_labels", lambda: m.set_labels(["sdk", "matrix"]))
    call("Model", "archive", m.archive)
    call("Model", "unarchive", m.unarchive)
    call("Model", "register_version", lambda: m.register_version(sc["ck_done_first"]),
         keep="mv_new")
    mine = lambda: p.need("det_model")  # noqa: E731
    call("Model", "move_to_workspace", lambda: mine().move_to_workspace("matrix-ws"))
    mv = m.get_version()
    call("ModelVersion", "reload", mv.reload)
    def link_version() -> None:
        # What core_context.experimental.report_task_using_model_version() records.
        from determined.common.api import bindings as b

        info = b.v1TrialSourceInfo(checkpointUuid=mv.checkpoint.uuid, trialId=int(sc["t_done"]),
                                   trialSourceInfoType=b.v1TrialSourceInfoType.INFERENCE,
                                   modelId=mv.model_id, modelVersion=mv.model_version)
        b.post_ReportTrialSourceInfo(d._session, body=b.v1ReportTrialSourceInfoRequest(trialSourceInfo=info))

    call("ModelVersion", "get_metrics", lambda: (link_version(), mv.get_metrics())[1], check=bool)
    call("ModelVersion", "iter_metrics", mv.iter_metrics, check=bool)
    call("ModelVersion", "set_name", lambda: mv.set_name("sdk-version"))
    call("ModelVersion", "set_notes", lambda: mv.set_notes("notes from the SDK probe"))
    call("ModelVersion", "delete", lambda: p.need("mv_new").delete())
    call("Model", "delete", lambda: mine().delete())


def workspace_probes(p: Probe, d: Any) -> None:
    call = p.call
    ws = d.get_workspace("matrix-ws")
    call("Workspace", "reload", ws.reload)
    call("Workspace", "list_projects", ws.list_projects,
         check=lambda ps: any(x.name == "matrix-proj" for x in ps))
    call("Workspace", "get_project", lambda: ws.get_project("matrix-proj"), keep="proj")
    call("Workspace", "list_pools", ws.list_pools)
    call("Workspace", "create_project", lambda: ws.create_project("sdk-proj", "from the SDK"),
         keep="sdk_proj")
    proj = lambda: p.need("proj")  # noqa: E731
    mine = lambda: p.need("sdk_proj")  # noqa: E731
    call("Project", "reload", lambda: proj().reload())
    call("Project", "list_experiments", lambda: proj().list_experiments())
    call("Project", "add_note", lambda: proj().add_note("sdk-note", "written by the probe"))
    call("Project", "remove_note", lambda: proj().remove_note("sdk-note"))
    call("Project", "set_description", lambda: mine().set_description("edited"))
    call("Project", "set_key", lambda: mine().set_key("SDKP"))
    call("Project", "set_name", lambda: mine().set_name("sdk-proj-2"))
    call("Project", "archive", lambda: mine().archive())
    call("Project", "unarchive", lambda: mine().unarchive())
    call("Workspace", "delete_project", lambda: ws.delete_project("sdk-proj-2"))
    pool = ResourcePool(d._session, p.sc.get("bind_pool", p.sc["pool"]))  # the SDK offers no public constructor
    call("ResourcePool", "add_bindings", lambda: pool.add_bindings(["matrix-ws"]))
    call("ResourcePool", "list_workspaces", pool.list_workspaces)
    call("ResourcePool", "replace_bindings", lambda: pool.replace_bindings(["matrix-ws"]))
    call("ResourcePool", "remove_bindings", lambda: pool.remove_bindings(["matrix-ws"]))


def user_probes(p: Probe) -> None:
    call = p.call
    user = lambda: p.need("det_user")  # noqa: E731
    call("User", "reload", lambda: user().reload())
    call("User", "change_display_name", lambda: user().change_display_name("SDK User"))
    call("User", "change_password", lambda: user().change_password("Sdk-Passw0rd2"))
    call("User", "deactivate", lambda: user().deactivate())
    call("User", "activate", lambda: user().activate())
    call("User", "link_with_agent", lambda: user().link_with_agent(
        agent_uid=1000, agent_gid=1000, agent_user="sdk", agent_group="sdk"))
    call("User", "rename", lambda: user().rename("sdk-det-user-2"))


GROUPS = [(experiment_probes, ["Experiment"]), (trial_probes, ["Trial"]),
          (checkpoint_probes, ["Checkpoint"]), (model_probes, ["Model", "ModelVersion"]),
          (workspace_probes, ["Workspace", "Project", "ResourcePool"])]


def main() -> None:
    with open(sys.argv[1]) as f:
        sc = json.load(f)
    p = Probe(sc)
    todo = surface()
    for owner, name in todo:
        if name in NA:
            p.record(owner, name, "n/a", NA[name])
    master, pw = sc["master"], sc["admin_password"]
    p.call("client", "login", lambda: client.login(master, "admin", pw))
    d = client.Determined(master, "admin", pw)
    api_probes(p, "client", client, "client")
    api_probes(p, "Determined", d, "det")
    for owner, api in (("client", client), ("Determined", d)):  # after a labelled model exists
        p.call(owner, "get_model_labels", api.get_model_labels, check=lambda ls: "sdk" in ls)
    unreached: dict[str, str] = {}
    for group, owners in GROUPS:
        try:
            group(p, d)
        except Exception as exc:  # noqa: BLE001 - getting the object failed: the rest is blocked
            for owner in owners:
                unreached[owner] = f"{type(exc).__name__}: {str(exc)[:200]}"
    user_probes(p)
    for owner, api in (("client", client), ("Determined", d)):
        p.call(owner, "delete_workspace",
               lambda api=api, owner=owner: api.delete_workspace(
                   "sdk-client-ws" if owner == "client" else "sdk-det-ws"))
    for owner, api in (("client", client), ("Determined", d)):
        p.call(owner, "logout", api.logout)
    for owner, name in todo:
        if (owner, name) not in p.results:
            why = unreached.get(owner)
            p.record(owner, name, "fails",
                     f"blocked: could not get the object: {why}" if why else "no probe written")


if __name__ == "__main__":
    main()
