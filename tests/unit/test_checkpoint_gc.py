"""The checkpoint GC policy (pure): which checkpoints ``select_to_delete`` deletes."""

from __future__ import annotations

from pathlib import Path

import pytest

from det_jupyter.services.checkpoints.gc import (
    CheckpointFacts,
    GcPolicy,
    TrialFacts,
    checkpoint_dir,
    select_to_delete,
    storage_root,
)


def ck(uuid: str, trial: int, steps: int, metric: float | None = None,
       state: str = "COMPLETED") -> CheckpointFacts:
    return CheckpointFacts(uuid, trial, steps, metric, state)


def ended(trial_id: int, latest: str | None = None) -> TrialFacts:
    return TrialFacts(trial_id, live=False, latest_checkpoint=latest)


def live(trial_id: int, latest: str | None = None) -> TrialFacts:
    return TrialFacts(trial_id, live=True, latest_checkpoint=latest)


# Two ended trials: trial 1 has a1..a3 (metric falls: a3 best), trial 2 has b1..b3 (b1 best).
TWO_TRIALS = [
    ck("a1", 1, 10, 0.9), ck("a2", 1, 20, 0.5), ck("a3", 1, 30, 0.2),
    ck("b1", 2, 10, 0.1), ck("b2", 2, 20, 0.3), ck("b3", 2, 30, 0.4),
]
ENDED = [ended(1, "a3"), ended(2, "b3")]
ALL = {c.uuid for c in TWO_TRIALS}

CASES = [
    # (id, policy, protected, kept)
    ("latest only", GcPolicy(0, 0, 1), set(), {"a3", "b3"}),
    ("nothing kept", GcPolicy(0, 0, 0), set(), set()),
    ("two latest", GcPolicy(0, 0, 2), set(), {"a2", "a3", "b2", "b3"}),
    ("trial best", GcPolicy(0, 1, 0), set(), {"a3", "b1"}),
    ("experiment best", GcPolicy(1, 0, 0), set(), {"b1"}),
    ("experiment best 2", GcPolicy(2, 0, 0), set(), {"b1", "a3"}),
    ("union of the three", GcPolicy(1, 1, 1), set(), {"b1", "a3", "b3"}),
    ("determined's default", GcPolicy(), set(), {"a3", "b1", "b3"}),
    ("larger is better", GcPolicy(1, 1, 0, smaller_is_better=False), set(), {"a1", "b3"}),
    ("more than there are", GcPolicy(10, 10, 10), set(), ALL),
    ("a registered one survives", GcPolicy(0, 0, 1), {"a1", "b2"}, {"a1", "a3", "b2", "b3"}),
]


@pytest.mark.parametrize(("policy", "protected", "kept"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_policy_on_ended_trials(policy: GcPolicy, protected: set[str], kept: set[str]) -> None:
    assert select_to_delete(TWO_TRIALS, ENDED, policy, protected) == ALL - kept


def test_the_latest_checkpoint_of_a_live_trial_is_never_deleted() -> None:
    # Trial 1 is live and its latest checkpoint is a2 (a3 was reported but a restart resumes
    # from a2): nothing policy says removes a2; the ended trial 2 loses everything.
    trials = [live(1, "a2"), ended(2, "b3")]
    assert select_to_delete(TWO_TRIALS, trials, GcPolicy(0, 0, 0)) == {"a1", "a3", "b1", "b2", "b3"}
    assert select_to_delete(TWO_TRIALS, trials, GcPolicy(0, 0, 1)) == {"a1", "b1", "b2"}


def test_a_live_trials_unvalidated_checkpoints_wait_for_their_metric() -> None:
    ckpts = [ck("x1", 1, 10, 0.5), ck("x2", 1, 20), ck("x3", 1, 30)]
    # A best count is set: x2 may still get a metric that makes it the best; x3 is the latest.
    assert select_to_delete(ckpts, [live(1, "x3")], GcPolicy(0, 1, 0)) == set()
    # Only "latest" counts: a metric would change nothing, x2 goes.
    assert select_to_delete(ckpts, [live(1, "x3")], GcPolicy(0, 0, 1)) == {"x1", "x2"}
    # Once the trial ended, a checkpoint without a metric is never "best".
    assert select_to_delete(ckpts, [ended(1, "x3")], GcPolicy(0, 1, 0)) == {"x2", "x3"}


@pytest.mark.parametrize(("state", "collected"), [
    ("COMPLETED", True), ("PARTIALLY_DELETED", True), ("DELETED", False), ("ERROR", False),
])
def test_only_completed_or_partial_checkpoints_are_candidates(state: str, collected: bool) -> None:
    ckpts = [ck("old", 1, 10, 0.5, state), ck("new", 1, 20, 0.4)]
    assert select_to_delete(ckpts, [ended(1, "new")], GcPolicy(0, 0, 1)) == ({"old"} if collected else set())


def ordered(uuid: str, trial: int, steps: int, metric: float, validation_order: int) -> CheckpointFacts:
    return CheckpointFacts(uuid, trial, steps, metric, "COMPLETED", validation_order)


# 0.38.1 ranks by (signed metric, validations.id): of tied metrics the earlier-reported
# validation ranks first, so a tie at the cut keeps exactly as many as the count says.
TIES = [
    # (id, checkpoints, policy, deleted)
    ("trial best: the earlier validation wins",
     [ordered("t1", 1, 10, 0.3, 11), ordered("t2", 1, 20, 0.3, 12), ordered("t3", 1, 30, 0.9, 13)],
     GcPolicy(0, 1, 0), {"t2", "t3"}),
    ("report order, not step order, breaks the tie",
     [ordered("t1", 1, 10, 0.3, 12), ordered("t2", 1, 20, 0.3, 11)],
     GcPolicy(0, 1, 0), {"t1"}),
    ("experiment best across trials",
     [ordered("a", 1, 10, 0.5, 30), ordered("b", 2, 10, 0.5, 20), ordered("c", 3, 10, 0.5, 25)],
     GcPolicy(1, 0, 0), {"a", "c"}),
    ("experiment best 2 of a three-way tie",
     [ordered("a", 1, 10, 0.5, 30), ordered("b", 2, 10, 0.5, 20), ordered("c", 3, 10, 0.5, 25)],
     GcPolicy(2, 0, 0), {"a"}),
    ("larger is better: ties go by report order too",
     [ordered("t1", 1, 10, 0.8, 5), ordered("t2", 1, 20, 0.8, 4), ordered("t3", 1, 30, 0.1, 6)],
     GcPolicy(0, 1, 0, smaller_is_better=False), {"t1", "t3"}),
    ("a better metric beats an earlier report",
     [ordered("t1", 1, 10, 0.4, 1), ordered("t2", 1, 20, 0.3, 2)],
     GcPolicy(0, 1, 0), {"t1"}),
]


@pytest.mark.parametrize(("ckpts", "policy", "deleted"), [c[1:] for c in TIES], ids=[c[0] for c in TIES])
def test_metric_ties_are_broken_by_validation_report_order(
        ckpts: list[CheckpointFacts], policy: GcPolicy, deleted: set[str]) -> None:
    trials = [ended(c.trial_id) for c in ckpts]
    assert select_to_delete(ckpts, trials, policy) == deleted


def test_checkpoints_at_one_step_share_their_validation_and_its_rank() -> None:
    # Two checkpoints at step 10 join the same validation: they share its rank (SQL rank()).
    ckpts = [ordered("x", 1, 10, 0.2, 7), ordered("y", 1, 10, 0.2, 7), ordered("z", 1, 20, 0.9, 8)]
    assert select_to_delete(ckpts, [ended(1, "z")], GcPolicy(0, 1, 0)) == {"z"}


def test_latest_ties_on_steps_share_a_rank() -> None:
    ckpts = [ck("p", 1, 30), ck("q", 1, 30), ck("r", 1, 20)]
    assert select_to_delete(ckpts, [ended(1, "q")], GcPolicy(0, 0, 1)) == {"r"}


def test_checkpoints_of_an_unknown_trial_are_kept() -> None:
    ckpts = [ck("u1", 7, 10, 0.5), ck("u2", 7, 20, 0.4)]
    assert select_to_delete(ckpts, [], GcPolicy(0, 0, 0)) == set()


def test_non_finite_metrics_are_not_ranked() -> None:
    ckpts = [ck("n1", 1, 10, float("nan")), ck("n2", 1, 20, 0.5), ck("n3", 1, 30, float("inf"))]
    assert select_to_delete(ckpts, [ended(1, "n3")], GcPolicy(0, 1, 0)) == {"n1", "n3"}


@pytest.mark.parametrize(("field", "value"), [
    ("save_trial_best", -1), ("save_trial_latest", 1.5), ("save_experiment_best", True),
])
def test_policy_rejects_bad_counts(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        GcPolicy(**{field: value})  # type: ignore[arg-type]


def test_policy_from_config_fills_determined_defaults() -> None:
    assert GcPolicy.from_config({}) == GcPolicy(0, 1, 1, True)
    cfg = {"checkpoint_storage": {"save_trial_latest": 3, "save_trial_best": None},
           "searcher": {"smaller_is_better": False}}
    assert GcPolicy.from_config(cfg) == GcPolicy(0, 1, 3, False)


@pytest.mark.parametrize(("storage", "root"), [
    ({"type": "shared_fs", "host_path": "/ck"}, Path("/ck")),
    ({"type": "shared_fs", "host_path": "/ck", "storage_path": "sub"}, Path("/ck/sub")),
    ({"type": "directory", "container_path": "/data"}, Path("/data")),
    ({"type": "s3", "bucket": "b"}, None),
    ({"type": "shared_fs"}, None),
])
def test_storage_root(storage: dict, root: Path | None) -> None:
    assert storage_root({"checkpoint_storage": storage}) == root


@pytest.mark.parametrize(("uuid", "ok"), [
    ("0b8e9c1a-4f7e-4a7e-9a57-2f1f0c2f9b11", True), ("..", False), ("../etc", False),
    ("a/b", False), ("", False), ("-rf", False),
])
def test_checkpoint_dir_never_leaves_the_root(uuid: str, ok: bool) -> None:
    assert (checkpoint_dir(Path("/ck"), uuid) == Path("/ck") / uuid) if ok else checkpoint_dir(Path("/ck"), uuid) is None
