"""What the widgets show, as pure functions of the master's JSON (no kernel, no I/O).

Each widget fetches plain data through the SDK and hands it to one of these; the widget only
copies the result into ipywidgets and charts. So everything a user sees is tested here by exact
assertions (tests/unit/test_widget_views.py).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from det_jupyter.names import visible

# The rung table is shared with the master's GET /api/v1/experiments/{id}/asha-rungs.
from det_jupyter.searcher.rungs import asha_rungs as asha_rungs

TERMINAL = frozenset({"COMPLETED", "CANCELED", "ERROR", "DELETED"})
_RUNNING_LIKE = frozenset({"ACTIVE", "QUEUED", "STARTING", "RUNNING", "PULLING"})
EXPERIMENT_COLUMNS = ("id", "name", "owner", "state", "progress", "trials", "best", "start")
EXPERIMENT_SORT_KEYS = ("id", "name", "owner", "state", "progress", "trials", "best", "start")


def state_name(state: str | None) -> str:
    """``STATE_RUNNING`` → ``RUNNING``."""
    return (state or "").removeprefix("STATE_")


def allowed_actions(state: str | None) -> list[str]:
    """The experiment verbs that make sense in ``state`` (the buttons that are enabled)."""
    s = state_name(state)
    if s in _RUNNING_LIKE:
        return ["pause", "kill"]
    if s == "PAUSED":
        return ["activate", "kill"]
    if s.startswith("STOPPING_") and s != "STOPPING_KILLED":
        return ["kill"]
    return []


def short_time(ts: str | None) -> str:
    """``2026-11-23T01:02:03.456Z`` → ``2026-11-23 01:02:03``."""
    return ts.replace("T", " ").split(".")[0].rstrip("Z") if ts else ""


def fmt(value: Any) -> str:
    """One table cell: blank for None, 6 significant digits for floats."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


# -- experiments list -------------------------------------------------------------------

def experiment_row(e: Mapping[str, Any]) -> dict[str, Any]:
    """One ``v1Experiment`` as a row of the experiments list."""
    progress = e.get("progress")
    return {
        "id": int(e["id"]),
        "name": str(e.get("name") or ""),
        "owner": str(e.get("username") or ""),
        "state": state_name(e.get("state")),
        "progress": float(progress) if isinstance(progress, (int, float)) else None,
        "trials": int(e.get("numTrials") or 0),
        "metric": e.get("searcherMetric"),
        "best": e.get("bestTrialSearcherMetric"),
        "best_trial": e.get("bestTrialId"),
        "start": short_time(e.get("startTime")),
        "end": short_time(e.get("endTime")),
        "actions": allowed_actions(e.get("state")),
    }


def experiment_rows(experiments: Iterable[Mapping[str, Any]], *, text: str = "",
                    states: Iterable[str] = (), sort: str = "id",
                    descending: bool = True) -> list[dict[str, Any]]:
    """The experiments list: filtered by ``text`` (in the id, name or owner, case-insensitive)
    and ``states`` (any of; empty = all), sorted by a column of ``EXPERIMENT_SORT_KEYS``.
    Rows without a value in the sort column come last."""
    if sort not in EXPERIMENT_SORT_KEYS:
        raise ValueError(f"sort must be one of {', '.join(EXPERIMENT_SORT_KEYS)}, got {sort!r}")
    wanted = {state_name(s).upper() for s in states}
    needle = text.strip().lower()
    rows = [experiment_row(e) for e in experiments]
    rows = [r for r in rows
            if (not wanted or r["state"] in wanted)
            and (not needle or needle in f"{r['id']} {r['name']} {r['owner']}".lower())]
    present = [r for r in rows if r.get(sort) is not None]
    missing = [r for r in rows if r.get(sort) is None]
    present.sort(key=lambda r: (r[sort], r["id"]), reverse=descending)
    return present + missing


def progress_text(fraction: float | None) -> str:
    """``0.4567`` → ``45.7%``; "—" for none reported. The master says 0 until the searcher
    or a trial reports progress (a ``single`` trial that never calls ``report_progress``
    stays at 0 until it ends), so 0 reads as "not reported", not as "nothing done"."""
    return "—" if not fraction else f"{fraction * 100:.1f}%"


def metric_choice(names: Sequence[str], current: str | None, preferred: str | None) -> str | None:
    """The metric a chart's dropdown shows among ``names``: the one shown now while it is
    still there, else ``preferred`` (the searcher's metric, ``loss``), else the first."""
    for name in (current, preferred):
        if name is not None and name in names:
            return name
    return names[0] if names else None


# -- experiment view: curves, best trial, ASHA rungs, hyperparameters -----------------------

def curves(metrics: Mapping[int, Mapping[str, Sequence[Mapping[str, Any]]]]) -> dict[str, Any]:
    """Training and validation curves per trial and metric.

    ``metrics``: ``{trial_id: {"training": [report…], "validation": [report…]}}`` with the
    SDK's reports (``{"steps_completed", "metrics": {name: value}}``). Returns
    ``{"training": {metric: {trial_id: {"x": [steps], "y": [values]}}}, "validation": …}``;
    non-numeric values are skipped, points are sorted by step.
    """
    out: dict[str, Any] = {"training": {}, "validation": {}}
    for trial_id in sorted(metrics):
        for group in ("training", "validation"):
            points: dict[str, list[tuple[int, float]]] = {}
            for report in metrics[trial_id].get(group) or ():
                step = report.get("steps_completed")
                if not isinstance(step, (int, float)):
                    continue
                for name, value in (report.get("metrics") or {}).items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool) \
                            and math.isfinite(value):
                        points.setdefault(name, []).append((int(step), float(value)))
            for name, pts in points.items():
                pts.sort()
                out[group].setdefault(name, {})[trial_id] = {"x": [p[0] for p in pts],
                                                             "y": [p[1] for p in pts]}
    return out


def best_trial(trials: Iterable[Mapping[str, Any]], smaller_is_better: bool = True
               ) -> dict[str, Any] | None:
    """The trial with the best ``searcherMetricValue``: ``{"id", "value", "hparams"}``;
    ``None`` when no trial has validated yet. Ties go to the lower id."""
    best: tuple[float, int, Mapping[str, Any]] | None = None
    for t in trials:
        value = t.get("searcherMetricValue")
        if not isinstance(value, (int, float)):
            continue
        key = float(value) if smaller_is_better else -float(value)
        if best is None or (key, int(t["id"])) < (best[0], best[1]):
            best = (key, int(t["id"]), t)
    if best is None:
        return None
    t = best[2]
    return {"id": int(t["id"]), "value": t["searcherMetricValue"], "hparams": dict(t.get("hparams") or {})}


def hparam_coords(trials: Iterable[Mapping[str, Any]], metric_name: str = "metric"
                  ) -> dict[str, Any]:
    """Parallel coordinates of the trials' hyperparameters and searcher metric.

    Returns ``{"trial_ids": [...], "dimensions": [{"label", "values", "tickvals"?,
    "ticktext"?}], "color": [metric or None]}``. Numeric hyperparameters are plotted as
    they are; any other kind (strings, bools, nested values) becomes an index into its
    sorted distinct values, named by ``ticktext``. Nested dicts are flattened as ``a.b``.
    Constant hyperparameters are left out (they say nothing).
    """
    rows = [t for t in sorted(trials, key=lambda t: int(t["id"]))]
    flat = [_flatten(t.get("hparams") or {}) for t in rows]
    names = sorted({k for f in flat for k in f})
    dims: list[dict[str, Any]] = []
    for name in names:
        values = [f.get(name) for f in flat]
        if len({json.dumps(v, sort_keys=True) for v in values}) <= 1 and len(rows) > 1:
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            dims.append({"label": name, "values": values})
        else:
            texts = [fmt(v) for v in values]
            levels = sorted(set(texts))
            dims.append({"label": name, "values": [levels.index(x) for x in texts],
                         "tickvals": list(range(len(levels))), "ticktext": levels})
    color = [t.get("searcherMetricValue") for t in rows]
    if any(isinstance(c, (int, float)) for c in color):
        dims.append({"label": metric_name, "values": color})
    return {"trial_ids": [int(t["id"]) for t in rows], "dimensions": dims, "color": color}


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def trial_rows(trials: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The experiment view's trial table."""
    return [{"id": int(t["id"]), "state": state_name(t.get("state")),
             "batches": int(t.get("totalBatchesProcessed") or 0),
             "metric": t.get("searcherMetricValue"), "restarts": int(t.get("restarts") or 0),
             "hparams": json.dumps(t.get("hparams") or {}, sort_keys=True)}
            for t in sorted(trials, key=lambda t: int(t["id"]))]


# -- trial view ---------------------------------------------------------------------------

def metrics_table(training: Sequence[Mapping[str, Any]], validation: Sequence[Mapping[str, Any]]
                  ) -> tuple[list[str], list[list[Any]]]:
    """One row per step with any report: ``Batches``, then ``training.<m>`` and
    ``validation.<m>`` columns (sorted names), blank where a step has no such value."""
    by_step: dict[int, dict[str, Any]] = {}
    names: set[str] = set()
    for group, reports in (("training", training), ("validation", validation)):
        for r in reports:
            step = r.get("steps_completed")
            if not isinstance(step, (int, float)):
                continue
            for k, v in (r.get("metrics") or {}).items():
                by_step.setdefault(int(step), {})[f"{group}.{k}"] = v
                names.add(f"{group}.{k}")
    cols = sorted(names, key=lambda n: (not n.startswith("training."), n))
    return ["Batches", *cols], [[s, *[by_step[s].get(c) for c in cols]] for s in sorted(by_step)]


def log_tail(lines: Sequence[str], n: int = 50) -> str:
    """The last ``n`` log lines as one text block."""
    return "\n".join(lines[-n:]) if n > 0 else ""


_LOG_PREFIX = re.compile(r"^(\[[^\]]*\] ?)+")


def crash_reason(lines: Sequence[str]) -> str | None:
    """Why a trial crashed, from its log's last lines: the exception line of the last
    Python traceback (``ValueError: boom``), a ``[rank=0]``-style prefix removed; ``None``
    when the lines hold no traceback."""
    plain = [_LOG_PREFIX.sub("", line.rstrip()) for line in lines]
    starts = [i for i, line in enumerate(plain) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return None
    for line in plain[starts[-1] + 1:]:
        if line and not line[0].isspace():
            return line
    return None


def checkpoint_rows(checkpoints: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``v1Checkpoint`` dicts as rows, by step."""
    rows = [{"uuid": c.get("uuid"), "state": state_name(c.get("state")),
             "batches": (c.get("metadata") or {}).get("steps_completed"),
             "files": len(c.get("resources") or {}), "time": short_time(c.get("reportTime"))}
            for c in checkpoints]
    return sorted(rows, key=lambda r: (r["batches"] is None, r["batches"] or 0, r["uuid"] or ""))


# -- job queue, cluster, registry ----------------------------------------------------------

def job_rows(jobs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A pool's queue (``v1Job`` dicts in queue order) as rows with a 0-based ``position``."""
    out = []
    for i, j in enumerate(jobs):
        summary = j.get("summary") or {}
        out.append({
            "position": i, "job_id": j.get("jobId"),
            "type": str(j.get("type") or "").removeprefix("TYPE_"), "name": j.get("name"),
            "state": state_name(summary.get("state")), "jobs_ahead": summary.get("jobsAhead"),
            "priority": j.get("priority"), "weight": j.get("weight"),
            "slots": f"{j.get('allocatedSlots', 0)}/{j.get('requestedSlots', 0)}",
            "user": j.get("username"), "pool": j.get("resourcePool"),
            "wait_reason": j.get("waitReason") or "",
        })
    return out


def queue_move(rows: Sequence[Mapping[str, Any]], job_id: str, direction: str) -> dict[str, str] | None:
    """The ``aheadOf``/``behindOf`` update that moves ``job_id`` one place up (``"up"``) or
    down (``"down"``) in the queue; ``None`` when it is already first/last or not there."""
    ids = [r["job_id"] for r in rows]
    if job_id not in ids:
        return None
    i = ids.index(job_id)
    if direction == "up":
        return {"jobId": job_id, "aheadOf": ids[i - 1]} if i > 0 else None
    if direction == "down":
        return {"jobId": job_id, "behindOf": ids[i + 1]} if i + 1 < len(ids) else None
    raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")


def _mib(n: Any) -> str:
    return f"{n / 2**20:.0f} MiB" if isinstance(n, (int, float)) else ""


def slot_rows(agents: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every slot of every agent, with its GPU utilisation and memory when reported
    (``stats``: ``gpu_percent``, ``memory_used``, ``memory_total``)."""
    rows = []
    for a in sorted(agents, key=lambda a: str(a.get("id"))):
        slots = a.get("slots") or {}
        for key in sorted(slots, key=lambda k: (len(k), k)):
            s = slots[key]
            device = s.get("device") or {}
            stats = s.get("stats") or {}
            rows.append({
                "agent": a.get("id"), "pool": ", ".join(a.get("resourcePools") or []),
                "slot": s.get("id", key),
                "type": str(device.get("type") or "").removeprefix("TYPE_"),
                "device": device.get("brand") or "",
                "enabled": bool(s.get("enabled")), "busy": s.get("container") is not None,
                "gpu_percent": stats.get("gpu_percent"),
                "memory": (f"{_mib(stats.get('memory_used'))} / {_mib(stats.get('memory_total'))}"
                           if stats.get("memory_total") else ""),
            })
    return rows


def cluster_summary(agents: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{"agents", "slots", "busy", "disabled"}`` over all agents."""
    rows = slot_rows(agents)
    return {"agents": len(agents), "slots": len(rows), "busy": sum(r["busy"] for r in rows),
            "disabled": sum(not r["enabled"] for r in rows)}


REGISTRY_UNAVAILABLE = ("The model registry is not available on this master yet "
                        "(det-jupyter has no /api/v1/models). Checkpoints are listed in the "
                        "experiment and trial views.")


def registry_message(models_response: Mapping[str, Any] | None) -> str:
    """What the registry widget says: the models' count, or that there is no registry
    (``None``: the master answered 404 to ``/api/v1/models``)."""
    if models_response is None:
        return REGISTRY_UNAVAILABLE
    n = len(models_response.get("models") or [])
    return f"{n} model{'s' if n != 1 else ''} registered"


# -- HTML text -------------------------------------------------------------------------------

def html_text(value: Any) -> str:
    """``value`` as HTML text: ``fmt``, control and invisible characters made visible
    (``\u202e``: a name cannot re-order what is shown), then ``html.escape`` (a name cannot
    be markup). Everything from the master goes into a widget's HTML through this."""
    return html.escape(visible(fmt(value)))


def html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An escaped HTML table (the widgets' tables), numbers right-aligned."""
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{html_text(h)}</th>"
                   for h in headers)
    body = []
    for row in rows:
        cells = []
        for v in row:
            align = "right" if isinstance(v, (int, float)) and not isinstance(v, bool) else "left"
            cells.append(f"<td style='text-align:{align};padding:2px 8px'>{html_text(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return ("<table class='det-jupyter-table' style='border-collapse:collapse'>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
