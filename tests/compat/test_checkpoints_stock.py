"""Issue 27, checkpoints and trial lists: the stock ``determined==0.38.1`` SDK and CLI pick,
order, filter and download checkpoints as on 0.38.1, against an answer computed independently
from the master's workloads route, on both backends.

One grid experiment of three trials (x = 1, 3, 7) validates ``vloss = x / step`` and
checkpoints at steps 5 and 10, with ``smaller_is_better: false``: six checkpoints with six
different metrics, the best of each trial at its first checkpoint (not its latest), the best of
the experiment in the trial that ran last.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._master import ADMIN_PASSWORD, ApiError, Client, MasterProcess, create_experiment

from .fixtures import _flows as f

pytestmark = pytest.mark.compat
TERMINAL = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}

_SDK = """
import json, sys, warnings
from determined.common.api import bindings
from determined.experimental import client

warnings.simplefilter("ignore", FutureWarning)
master, password, exp_id, trial_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
client.login(master=master, user="admin", password=password)
exp = client.get_experiment(exp_id)
sess = client._determined._session

def metric(c):
    return c.training.validation_metrics["avgMetrics"].get("vloss")

out = {
    "top": exp.top_checkpoint().uuid,
    "top3": [(c.uuid, metric(c), c.state.value) for c in exp.list_checkpoints(max_results=3)],
    "worst3": [c.uuid for c in exp.list_checkpoints(sort_by="vloss", order_by=client.OrderBy.ASC, max_results=3)],
    "by_steps": [c.uuid for c in exp.list_checkpoints(sort_by=client.CheckpointSortBy.BATCH_NUMBER,
                                                      order_by=client.OrderBy.DESC)],
    "all": [c.uuid for c in exp.list_checkpoints()],
    "trial_top": client.get_trial(trial_id).top_checkpoint().uuid,
    "trial_latest": client.get_trial(trial_id).select_checkpoint(latest=True).uuid,
    "trials_best_first": [t.id for t in exp.list_trials(sort_by=client.TrialSortBy.BEST_VALIDATION_METRIC,
                                                         order_by=client.OrderBy.ASC)],
    "trials_latest_desc": [t.id for t in exp.list_trials(sort_by=client.TrialSortBy.LATEST_VALIDATION_METRIC,
                                                          order_by=client.OrderBy.DESC)],
    "trials": [t.to_json() for t in bindings.get_GetExperimentTrials(sess, experimentId=exp_id).trials],
}
print(json.dumps(out))
"""


def _sdk(det_env, master: MasterProcess, exp_id: int, trial_id: int) -> dict:
    res = det_env.run_python(_SDK, args=[master.url, ADMIN_PASSWORD, str(exp_id), str(trial_id)])
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _det(det_env, master: MasterProcess, *args: str) -> str:
    res = det_env.det(list(args), master.url, user="admin", password=ADMIN_PASSWORD)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return res.stdout


def _stored(client: Client, trial_ids: list[int]) -> dict[str, dict]:
    """Every checkpoint, read independently from each trial's workloads: its trial, step,
    state and the ``vloss`` validated at its step."""
    out: dict[str, dict] = {}
    for tid in trial_ids:
        work = f.workloads(client, tid)
        vloss = {w["validation"]["totalBatches"]: w["validation"]["metrics"]["avgMetrics"]["vloss"]
                 for w in work if "validation" in w}
        for w in work:
            if "checkpoint" in w:
                c = w["checkpoint"]
                out[c["uuid"]] = {"trial": tid, "steps": c["totalBatches"], "state": c["state"],
                                  "vloss": vloss[c["totalBatches"]]}
    return out


def _best_first(stored: dict[str, dict], *, completed_only: bool) -> list[str]:
    """Larger ``vloss`` is better here: best first."""
    kept = [u for u, c in stored.items() if not completed_only or c["state"] == "STATE_COMPLETED"]
    return sorted(kept, key=lambda u: -stored[u]["vloss"])


def test_the_stock_sdk_and_cli_pick_and_order_checkpoints(det_env, any_master: MasterProcess,
                                                          tmp_path: Path) -> None:
    master = any_master
    client = master.admin()
    config = f.steps_config(
        det_env.python, name="ckpt-order", length=10,
        hparams={"x": {"type": "categorical", "vals": [1, 3, 7]}},
        searcher={"name": "grid", "smaller_is_better": False, "max_concurrent_trials": 2},
        # Keep every checkpoint: the lists, not the GC, are under test.
        checkpoint_storage={"save_experiment_best": 10, "save_trial_best": 10, "save_trial_latest": 10},
    )
    exp_id = create_experiment(client, config, f.STEPS_DIR)["experiment"]["id"]
    assert f.wait_state(client, exp_id, TERMINAL, timeout=150) == "STATE_COMPLETED"
    trials = {t["hparams"]["x"]: t["id"] for t in f.trials(client, exp_id)}
    assert sorted(trials) == [1, 3, 7]

    stored = _stored(client, list(trials.values()))
    assert len(stored) == 6 and len({c["vloss"] for c in stored.values()}) == 6
    best = _best_first(stored, completed_only=True)
    # The independent answer: x=7 at step 5 (7/5 = 1.4) is the best; step 10 its trial's latest.
    assert stored[best[0]] == {"trial": trials[7], "steps": 5, "state": "STATE_COMPLETED",
                               "vloss": pytest.approx(1.4)}

    # The master's own list carries each checkpoint's metrics at its step.
    listed = client.get(f"/api/v1/experiments/{exp_id}/checkpoints?sortByAttr=SORT_BY_SEARCHER_METRIC"
                        "&limit=2&offset=1")
    assert [c["uuid"] for c in listed["checkpoints"]] == best[1:3]
    assert listed["pagination"] == {"offset": 1, "limit": 2, "startIndex": 1, "endIndex": 3, "total": 6}
    for c in listed["checkpoints"]:
        want = stored[c["uuid"]]
        assert c["training"]["searcherMetric"] == pytest.approx(want["vloss"])
        assert c["training"]["validationMetrics"]["avgMetrics"] == {"vloss": pytest.approx(want["vloss"])}
        steps = want["steps"]
        assert c["training"]["trainingMetrics"]["avgMetrics"] == pytest.approx({"loss": 1 / steps, "step": steps})
    one = client.get(f"/api/v1/checkpoints/{best[0]}")["checkpoint"]
    assert one["training"]["searcherMetric"] == pytest.approx(1.4)

    x7 = trials[7]
    out = _sdk(det_env, master, exp_id, x7)
    assert out["top"] == best[0]
    assert [u for u, _, _ in out["top3"]] == best[:3]
    assert [m for _, m, _ in out["top3"]] == pytest.approx([stored[u]["vloss"] for u in best[:3]])
    assert out["worst3"] == best[::-1][:3]
    assert out["all"] == best
    by_steps = sorted(stored, key=lambda u: stored[u]["steps"])
    assert [stored[u]["steps"] for u in out["by_steps"]] == [stored[u]["steps"] for u in by_steps][::-1]
    assert out["trial_top"] == best[0]  # x=7: its step 5
    assert stored[out["trial_latest"]] == {**stored[best[0]], "steps": 10, "vloss": pytest.approx(0.7)}
    # Trials: best validation first (larger is better: x=7, 3, 1); latest (x/10) descending:
    # descending of the signed metric is worst first.
    assert out["trials_best_first"] == [trials[7], trials[3], trials[1]]
    assert out["trials_latest_desc"] == [trials[1], trials[3], trials[7]]
    for t in out["trials"]:
        x = t["hparams"]["x"]
        assert t["bestValidation"]["totalBatches"] == 5, t
        assert t["bestValidation"]["metrics"]["avgMetrics"] == {"vloss": pytest.approx(x / 5)}
        assert t["latestValidation"]["totalBatches"] == 10, t
        assert t["latestValidation"]["metrics"]["avgMetrics"] == {"vloss": pytest.approx(x / 10)}

    # The stock list-checkpoints shows every checkpoint with its searcher metric.
    table = _det(det_env, master, "experiment", "list-checkpoints", str(exp_id))
    for uuid, c in stored.items():
        line = next(ln for ln in table.splitlines() if uuid in ln)
        assert str(c["vloss"]) in line, (uuid, line)

    # Delete the best: it leaves the completed-only lists, top_checkpoint and the download.
    client.request("DELETE", "/api/v1/checkpoints", {"checkpointUuids": [best[0]]})
    stored = _stored(client, list(trials.values()))
    assert stored[best[0]]["state"] == "STATE_DELETED"
    remaining = _best_first(stored, completed_only=True)
    assert remaining == best[1:]
    out = _sdk(det_env, master, exp_id, x7)
    assert out["top"] == remaining[0]
    assert [u for u, _, _ in out["top3"]] == remaining[:3]
    assert {s for _, _, s in out["top3"]} == {"STATE_COMPLETED"}
    # Trial.list_checkpoints sends no states (0.38.1's SDK): the deleted one is still its best.
    assert out["trial_top"] == best[0]

    dest = tmp_path / "downloads"
    shown = _det(det_env, master, "experiment", "download", str(exp_id), "--top-n", "1", "-o", str(dest))
    assert remaining[0] in shown
    assert [p.name for p in dest.iterdir()] == [remaining[0]]
    state = json.loads((dest / remaining[0] / "state.json").read_text())
    assert state == {"step": 10, "trial_id": x7}

    # --best N lists by searcher metric with no state filter: the deleted one stays first.
    best_table = _det(det_env, master, "experiment", "list-checkpoints", str(exp_id), "--best", "3")
    order = [u for ln in best_table.splitlines() for u in stored if u in ln]
    assert order == best[:3]


@pytest.mark.parametrize(("query", "word"), [
    ("sortByAttr=SORT_BY_NAME", "sortByAttr"),
    ("limit=-1", "limit"),
    ("offset=5", "offset"),
    ("offset=-1&limit=x", "limit"),
    ("sortByAttr=SORT_BY_UUID&sortByMetric=loss", "sortByMetric"),
    ("states=COMPLETED", "states"),
    ("orderBy=UP", "orderBy"),
])
def test_bad_checkpoint_list_parameters_are_400_naming_them(master: MasterProcess, query: str, word: str) -> None:
    client = master.admin()
    exp_id = create_experiment(client, f.steps_config("/bin/false", name="bad-params"), f.STEPS_DIR,
                               activate=False)["experiment"]["id"]
    with pytest.raises(ApiError) as err:
        client.get(f"/api/v1/experiments/{exp_id}/checkpoints?{query}")
    assert err.value.status == 400 and word in err.value.body["message"], err.value.body


@pytest.mark.parametrize(("query", "word"), [
    ("sortBy=SORT_BY_NAME", "sortBy"), ("limit=-1", "limit"), ("orderBy=UP", "orderBy"),
])
def test_bad_trial_list_parameters_are_400_naming_them(master: MasterProcess, query: str, word: str) -> None:
    client = master.admin()
    exp_id = create_experiment(client, f.steps_config("/bin/false", name="bad-trial-params"), f.STEPS_DIR,
                               activate=False)["experiment"]["id"]
    with pytest.raises(ApiError) as err:
        client.get(f"/api/v1/experiments/{exp_id}/trials?{query}")
    assert err.value.status == 400 and word in err.value.body["message"], err.value.body
    page = client.get(f"/api/v1/experiments/{exp_id}/trials?offset=-3&sortBy=SORT_BY_DURATION")
    assert page == {"trials": [], "pagination": {"offset": -3, "limit": 0, "startIndex": 0, "endIndex": 0,
                                                 "total": 0}}
