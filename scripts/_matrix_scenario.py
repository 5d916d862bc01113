"""The objects the compat matrix's commands act on, made through the stock CLI before any runs.

``build`` returns the placeholder values the case table uses (``e_done`` → an experiment id,
…). A step that fails is recorded, not raised: the commands that need its object are then
reported as blocked, naming the step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from _matrix_stock import Outcome, StockClient

from tests._master import ADMIN_PASSWORD, Client, MasterProcess
from tests.compat.fixtures._flows import STEPS_DIR, steps_config

TERMINAL = {"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"}


@dataclass
class Scenario:
    values: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # "what: why", one per failed step


class SetupFailed(Exception):
    pass


def _ok(out: Outcome, what: str) -> str:
    if out.rc != 0 or out.timed_out:
        lines = (out.stderr or out.stdout).strip().splitlines()
        raise SetupFailed(f"`det {what}` exited {out.rc}: {lines[-1] if lines else ''}")
    return out.stdout


def _created_id(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith("Created experiment "):
            return line.split()[-1]
    raise SetupFailed(f"no 'Created experiment' line in {stdout[-200:]!r}")


def _wait(predicate: Callable[[], Any], what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.5)
    raise SetupFailed(f"timed out after {timeout:.0f}s waiting for {what}")


def write_files(work: Path, python: Path) -> dict[str, str]:
    """The config files the cases name, written under ``work``."""
    # Keep every checkpoint (Determined's default keeps only the latest and the best, so the
    # first of two would be deleted when the trial ends).
    keep = {"checkpoint_storage": {"save_trial_latest": 5}}
    files = {
        "steps_cfg": steps_config(python, name="matrix-run", length=10, **keep),
        "done_cfg": steps_config(python, name="matrix-done", length=10, **keep),
        "spare_cfg": steps_config(python, name="matrix-spare", length=10, **keep),
        "other_cfg": steps_config(python, name="matrix-other", length=10, **keep),
        "live_cfg": steps_config(python, name="matrix-live", length=100000,
                                 hparams={"every": 1000, "sleep": 0.5}),
        "tpl_file": yaml.safe_dump({"description": "matrix template",
                                    "resources": {"slots": 0}}),
        "policy_file": yaml.safe_dump({"invariant_config": {"description": "matrix policy"}}),
        "task_file": yaml.safe_dump({"entrypoint": ["echo", "MATRIX-TASK"],
                                     "resources": {"slots": 0}}),
        "gt_file": yaml.safe_dump({"entrypoint": ["sleep", "3600"], "resources": {"slots": 0}}),
    }
    out = {}
    for key, text in files.items():
        path = work / f"{key}.yaml"
        path.write_text(text)
        out[key] = str(path)
    return out


def build(master: MasterProcess, det: StockClient, work: Path) -> Scenario:
    sc = Scenario()
    v = sc.values
    v.update(write_files(work, det.python), work=str(work), steps_dir=str(STEPS_DIR),
             admin_password=ADMIN_PASSWORD)
    rest = master.admin()

    def step(what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except SetupFailed as exc:
            sc.failures.append(f"{what}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a REST read that failed is a setup failure
            sc.failures.append(f"{what}: {type(exc).__name__}: {exc}")

    def create(key: str, cfg: str, *extra: str) -> Callable[[], None]:
        def go() -> None:
            v[key] = _created_id(_ok(det.det(["experiment", "create", v[cfg], str(STEPS_DIR),
                                              *extra], timeout=90), "experiment create"))
        return go

    def cli(key: str | None, argv: list[str]) -> Callable[[], None]:
        def go() -> None:
            out = _ok(det.det(argv, timeout=90), " ".join(argv[:2]))
            if key:  # detached tasks print their id as the last line
                v[key] = out.strip().splitlines()[-1].strip()
        return go

    step("finished experiment", create("e_done", "done_cfg"))
    step("spare experiment", create("e_spare", "spare_cfg"))
    step("experiment for checkpoint deletes", create("e_other", "other_cfg"))
    step("running experiment", create("e_live", "live_cfg"))
    step("paused experiment A", create("e_paused_a", "steps_cfg", "--paused"))
    step("paused experiment B", create("e_paused_b", "steps_cfg", "--paused"))
    step("workspace", cli(None, ["workspace", "create", "matrix-ws"]))
    step("project", cli(None, ["project", "create", "matrix-ws", "matrix-proj"]))
    step("user", cli(None, ["user", "create", "matrix-user", "--password", "Matrix-Passw0rd1"]))
    step("group", cli(None, ["user-group", "create", "matrix-group", "--add-user",
                             "matrix-user"]))
    step("template", cli(None, ["template", "create", "matrix-tpl", v["tpl_file"]]))
    step("token", lambda: _token(det, v))
    slots0 = ["--config", "resources.slots=0"]
    step("notebook", cli("nb", ["notebook", "start", "-d", *slots0]))
    step("command", cli("cmd", ["command", "run", "-d", *slots0, "sleep", "3600"]))
    step("second command", cli("cmd_b", ["command", "run", "-d", *slots0, "sleep", "3600"]))
    step("shell", cli("sh", ["shell", "start", "-d", *slots0]))
    step("generic task", lambda: v.update(gt=_ok(det.det(["task", "create", v["gt_file"]], timeout=90),
                                                  "task create").strip().split()[-1]))
    for key in ("e_done", "e_spare", "e_other"):
        step(f"{key} finished", lambda key=key: _finished(rest, v, key))
    step("model", cli(None, ["model", "create", "matrix-model"]))
    step("model version", lambda: _ok(det.det(
        ["model", "register-version", "matrix-model", v["ck_done"]]), "model register-version"))
    step("tensorboard", cli("tb", ["tensorboard", "start", v.get("e_done", "0"), "-d"]))
    step("running trial", lambda: _live(rest, v))
    step("agent and pool", lambda: _cluster(rest, v))
    for key, kind in (("nb", "notebook"), ("cmd", "command"), ("sh", "shell"),
                      ("tb", "tensorboard")):
        step(f"{kind} running", lambda key=key, kind=kind: _task_running(rest, v, key, kind))
    return sc


def _token(det: StockClient, v: dict[str, str]) -> None:
    import json

    got = json.loads(_ok(det.det(["token", "create", "matrix-user", "--json"]), "token create"))
    v["token"], v["token_id"] = got["token"], str(got["tokenId"])


def _finished(rest: Client, v: dict[str, str], key: str) -> None:
    exp_id = v[key]
    state = _wait(lambda: (s := rest.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"])
                  in TERMINAL and s, f"experiment {exp_id} to end")
    if state != "STATE_COMPLETED":
        raise SetupFailed(f"experiment {exp_id} ended {state}")
    [trial] = rest.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]
    cks = [c for c in rest.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
           if c["state"] == "STATE_COMPLETED"]
    uuids = [c["uuid"] for c in sorted(cks, key=lambda c: c["metadata"]["steps_completed"])]
    if len(uuids) < 2:
        raise SetupFailed(f"experiment {exp_id} has {len(uuids)} checkpoints, not 2")
    name = key.removeprefix("e_")
    v[f"t_{name}"] = str(trial["id"])
    v[f"ck_{name}_first"], v[f"ck_{name}"] = uuids[0], uuids[-1]
    if key == "e_other":
        v["ck_other_a"], v["ck_other_b"] = uuids[0], uuids[-1]


def _live(rest: Client, v: dict[str, str]) -> None:
    exp_id = v["e_live"]

    def running_trial() -> str | None:
        trials = rest.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]
        return next((str(t["id"]) for t in trials if t["state"] == "STATE_RUNNING"), None)

    v["t_live"] = _wait(running_trial, f"a running trial of experiment {exp_id}")
    v["job_live"] = rest.get(f"/api/v1/experiments/{exp_id}")["experiment"]["jobId"]


def _cluster(rest: Client, v: dict[str, str]) -> None:
    v["agent"] = rest.get("/api/v1/agents")["agents"][0]["id"]
    v["pool"] = rest.get("/api/v1/resource-pools")["resourcePools"][0]["name"]
    v["bind_pool"] = "matrix-pool"  # compat_matrix's master.yaml: a pool that is not the default


def _task_running(rest: Client, v: dict[str, str], key: str, kind: str) -> None:
    task_id = v[key]
    _wait(lambda: rest.get(f"/api/v1/{kind}s/{task_id}")[kind]["state"] == "STATE_RUNNING",
          f"{kind} {task_id} running", timeout=90)
