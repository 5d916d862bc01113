"""TensorBoard tasks, pure parts: their settings and argv, workloads → scalars, event files
that TensorBoard itself reads back, mirroring a trial's own event files, the token guard, and
which trials a TensorBoard task may read."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from det_jupyter.errors import NotFound
from det_jupyter.services.accounts.auth import AllocationPrincipal, User
from det_jupyter.services.interactive import tensorboards
from det_jupyter.services.interactive._tensorboard import (
    TensorboardSettings,
    tensorboard_entrypoint,
)
from det_jupyter.services.interactive.kinds import KINDS
from det_jupyter.tasks._events import (
    RunWriter,
    Scalar,
    mirror_event_files,
    scalars_from_workloads,
    validation_tag,
)
from det_jupyter.tasks.tensorboard import require_token, tensorboard_dir

WORKLOADS = [
    {"training": {"totalBatches": 1, "endTime": "2026-11-24T04:00:00Z",
                  "metrics": {"avgMetrics": {"loss": 1.0, "note": "text", "flag": True},
                              "batchMetrics": []}}},
    {"training": {"totalBatches": 2, "endTime": "2026-11-24T04:00:01Z",
                  "metrics": {"avgMetrics": {"loss": 0.5}, "batchMetrics": []}}},
    {"validation": {"totalBatches": 2, "endTime": "2026-11-24T04:00:02Z",
                    "metrics": {"avgMetrics": {"validation_loss": 0.7, "acc": 3},
                                "batchMetrics": []}}},
    {"checkpoint": {"uuid": "u", "totalBatches": 2}},
]


# -- settings and argv -------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ({"experiment_ids": [3, "4", 3]}, ((3, 4), (), 300.0)),
    ({"trial_ids": [7], "idle_timeout": "10m"}, ((), (7,), 600.0)),
    ({"experiment_ids": [1], "trial_ids": [2], "idle_timeout": 5}, ((1,), (2,), 5.0)),
])
def test_settings(raw: dict, expected: tuple) -> None:
    s = TensorboardSettings.parse(raw, None)
    assert (s.experiment_ids, s.trial_ids, s.idle_timeout_s) == expected


def test_the_master_default_idle_timeout_applies_when_none_is_given() -> None:
    assert TensorboardSettings.parse({"trial_ids": [1]}, 42.0).idle_timeout_s == 42.0


@pytest.mark.parametrize("raw, message", [
    ({}, "needs experiment ids or trial ids"),
    ({"experiment_ids": []}, "needs experiment ids or trial ids"),
    ({"experiment_ids": 3}, "experiment_ids must be a list"),
    ({"trial_ids": [0]}, "positive integer"),
    ({"trial_ids": [True]}, "positive integer"),
    ({"trial_ids": ["x"]}, "positive integer"),
    ({"trial_ids": [1], "idle_timeout": "soon"}, "idle_timeout"),
])
def test_bad_settings_name_the_value(raw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TensorboardSettings.parse(raw, None)


def test_the_kind_builds_the_task_program_under_the_proxy_path() -> None:
    kind = KINDS["TENSORBOARD"]
    assert (kind.cli, kind.probe, kind.jupyter_idle) == ("tensorboard", "data/environment", False)
    cfg = kind.settings({"experiment_ids": [3], "trial_ids": [9]}, "alice", {})
    assert cfg == {"experiment_ids": [3], "trial_ids": [9], "idle_timeout": 300.0}
    argv, env = kind.build("tb-1", "10.0.0.5", 4321, cfg, False)
    assert argv == tensorboard_entrypoint("tb-1", "10.0.0.5", 4321, cfg) == [
        "python3", "-m", "det_jupyter.tasks.tensorboard", "--port", "4321", "--bind", "10.0.0.5",
        "--base-url", "/proxy/tb-1/", "--experiment", "3", "--trial", "9"]
    assert env == {"TENSORBOARD_PORT": "4321"}


# -- workloads → scalars → event files ------------------------------------------------------

def test_scalars_from_workloads() -> None:
    got = scalars_from_workloads(WORKLOADS)
    assert [(s.tag, s.step, s.value) for s in got] == [
        ("loss", 1, 1.0), ("loss", 2, 0.5), ("val_acc", 2, 3.0), ("validation_loss", 2, 0.7)]
    assert got[0].wall_time == pytest.approx(1795492800.0)


@pytest.mark.parametrize("name, tag", [("loss", "val_loss"), ("validation_loss", "validation_loss"),
                                       ("val_acc", "val_acc")])
def test_validation_tags(name: str, tag: str) -> None:
    assert validation_tag(name) == tag


def _read_back(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """What TensorBoard's own loader reads from the event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, round(e.value, 6)) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def test_run_writer_appends_each_point_once_and_tensorboard_reads_them(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="pip install -e .[tensorboard]")
    run = tmp_path / "experiment_1" / "trial_2"
    writer = RunWriter(str(run))
    assert writer.write(scalars_from_workloads(WORKLOADS[:2])) == 2
    assert writer.write(scalars_from_workloads(WORKLOADS)) == 2  # only the validation ones
    assert writer.write([Scalar("loss", 2, 9.0, 0.0)]) == 0  # a step is written once
    writer.close()
    assert _read_back(run) == {"loss": [(1, 1.0), (2, 0.5)], "val_acc": [(2, 3.0)],
                               "validation_loss": [(2, 0.7)]}


def test_mirroring_copies_only_new_bytes(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    event = src / "sub" / "events.out.tfevents.1.host"
    event.write_bytes(b"abc")
    (src / "notes.txt").write_text("not an event file")
    assert mirror_event_files(str(src), str(dst)) == 3
    assert mirror_event_files(str(src), str(dst)) == 0
    with event.open("ab") as fh:
        fh.write(b"def")
    assert mirror_event_files(str(src), str(dst)) == 3
    assert (dst / "sub" / "events.out.tfevents.1.host").read_bytes() == b"abcdef"
    assert not (dst / "notes.txt").exists()
    event.write_bytes(b"x")  # rewritten shorter: copied again whole
    assert mirror_event_files(str(src), str(dst)) == 1
    assert (dst / "sub" / "events.out.tfevents.1.host").read_bytes() == b"x"
    assert mirror_event_files(str(tmp_path / "missing"), str(dst)) == 0


def test_the_trials_own_event_files_are_found_on_shared_fs_only() -> None:
    fs = {"type": "shared_fs", "host_path": "/data", "storage_path": "ckpt"}
    assert tensorboard_dir(fs, "c1", 3, 9) == os.path.join(
        "/data", "ckpt", "c1", "tensorboard", "experiment", "3", "trial", "9")
    assert tensorboard_dir({"type": "s3", "bucket": "b"}, "c1", 3, 9) is None


# -- the token guard in front of TensorBoard --------------------------------------------------

def _call(app: Any, headers: dict[str, str]) -> tuple[str, bytes]:
    seen: list[str] = []
    body = b"".join(app(headers, lambda status, _headers: seen.append(status)))
    return seen[0], body


def test_only_the_upstream_token_gets_through() -> None:
    def inner(environ: dict, start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"scalars"]

    app = require_token(inner, "s3cret")
    assert _call(app, {"HTTP_AUTHORIZATION": "token s3cret"}) == ("200 OK", b"scalars")
    for headers in ({}, {"HTTP_AUTHORIZATION": "token wrong"},
                    {"HTTP_AUTHORIZATION": "Bearer s3cret"}):
        assert _call(app, headers)[0] == "403 Forbidden"
    assert _call(require_token(inner, ""), {"HTTP_AUTHORIZATION": "token "})[0] == "403 Forbidden"


# -- what a TensorBoard task may read -----------------------------------------------------

class FakeCommands:
    """The commands service as ``may_read`` sees it: task id → config of a TENSORBOARD."""

    def __init__(self, configs: dict[str, dict]) -> None:
        self.configs = configs

    def get(self, task_id: str, kind: str) -> Any:
        if task_id not in self.configs:
            raise NotFound(f"{kind} {task_id} not found")
        return SimpleNamespace(config=self.configs[task_id])


class FakeViews:
    """Trials 1-2 in experiment 10, trial 3 in experiment 20, trial 4 in experiment 30."""

    EXP = {1: 10, 2: 10, 3: 20, 4: 30}

    def trial(self, trial_id: int) -> Any:
        exp = self.EXP.get(trial_id)
        return None if exp is None else SimpleNamespace(row=SimpleNamespace(experiment_id=exp))

    def experiment(self, exp_id: int) -> Any:
        return object() if exp_id in self.EXP.values() else None


ALICE = User(id=2, username="alice", admin=False, active=True, display_name=None, modified_at=0)


def _principal(task_id: str, trial_id: int | None = None) -> AllocationPrincipal:
    return AllocationPrincipal(allocation_id=f"{task_id}.1", task_id=task_id, trial_id=trial_id,
                               experiment_id=None, user=ALICE)


def test_a_tensorboard_task_reads_exactly_its_experiments_and_trials() -> None:
    commands = FakeCommands({"tb-1": {"experiment_ids": [10], "trial_ids": [3]}})
    views = FakeViews()
    tb = _principal("tb-1")

    def reads(principal: Any, **what: int) -> bool:
        return tensorboards.may_read(commands, views, principal, **what)

    assert [t for t in (1, 2, 3, 4, 99) if reads(tb, trial_id=t)] == [1, 2, 3]
    assert [e for e in (10, 20, 30) if reads(tb, experiment_id=e)] == [10, 20]
    # A trial's own task, another task, or a user: never by this rule.
    assert not reads(_principal("tb-1", trial_id=4), trial_id=1)
    assert not reads(_principal("cmd-2"), trial_id=1)
    assert not reads(ALICE, trial_id=1)


def test_prepare_checks_the_ids_and_asks_for_no_slots() -> None:
    views = FakeViews()
    cfg = tensorboards.prepare(views, {"description": "d"}, [10], [])
    assert cfg["experiment_ids"] == [10] and cfg["resources"] == {"slots": 0}
    cfg = tensorboards.prepare(views, {"resources": {"slots": 1}, "trial_ids": [3]}, [], [])
    assert cfg["trial_ids"] == [3] and cfg["resources"] == {"slots": 1}
    with pytest.raises(NotFound, match="experiment 99"):
        tensorboards.prepare(views, {}, [99], [])
    with pytest.raises(NotFound, match="trial 98"):
        tensorboards.prepare(views, {}, [], [98])
    from det_jupyter.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="needs experiment ids"):
        tensorboards.prepare(views, {}, [], [])
