"""Which stock ``determined==0.38.1`` CLI commands and SDK methods work against det-jupyter.

    .venv/bin/python scripts/compat_matrix.py [--out docs/compat-matrix.md] [--keep]

Starts a fresh master (``tests/_master.py``: SQLite, an embedded agent with 2 CPU slots) in a
temporary directory, makes the objects commands need with the stock CLI
(``_matrix_scenario.py``), runs every leaf of the stock CLI's argparse tree with the arguments
in ``_matrix_cli_cases.py``, then calls every public SDK method (``_matrix_sdk_probe.py``, run by
the stock venv's python), and writes the matrix as Markdown. The stock client is the one in
``.venv-det`` (``DET_COMPAT_VENV`` moves it). Takes a few minutes; ``--keep`` keeps the
temporary directory (the master's log, each command's output under ``work/cli/``, what the
commands downloaded).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import string
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _matrix_classify import FAILS, NA, Verdict, cause_of, classify_cli, master_errors  # noqa: E402
from _matrix_cli_cases import CASES, Case  # noqa: E402
from _matrix_report import Row, render, summary  # noqa: E402
from _matrix_scenario import Scenario, build  # noqa: E402
from _matrix_stock import StockClient  # noqa: E402

from tests._master import ADMIN_PASSWORD, MasterProcess  # noqa: E402

PROBE = Path(__file__).with_name("_matrix_sdk_probe.py")

# Walks the stock CLI's parser; one line of JSON: every leaf as its path of canonical names
# (the longest of a command's aliases, so `e` is listed as `experiment`).
_ENUMERATE = """
import argparse, json, determined.cli
from determined.cli import cli as c
p = c.make_parser(); determined.cli.add_args(p, c.all_args_description)
leaves = []
def walk(parser, path):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        leaves.append(path); return
    for a in subs:
        names = {}
        for name, sub in a.choices.items():
            names.setdefault(id(sub), []).append(name)
        for aliases in names.values():
            walk(a.choices[aliases[0]], path + [max(aliases, key=len)])
walk(p, [])
print(json.dumps({"version": determined.__version__, "leaves": leaves}))
"""


def cli_leaves(stock: StockClient) -> list[str]:
    out = stock.run_python(["-c", _ENUMERATE], timeout=120)
    if out.rc != 0:
        raise SystemExit(f"could not list the stock CLI's commands: {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if got["version"] != "0.38.1":
        raise SystemExit(f"{stock.venv} has determined=={got['version']}; the matrix is for 0.38.1")
    return [" ".join(path) for path in got["leaves"]]


def _fields(*texts: str | None) -> set[str]:
    return {f for t in texts if t for _, f, _, _ in string.Formatter().parse(t) if f}


def _log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def _log_since(log: Path, offset: int) -> str:
    time.sleep(0.2)  # the master logs a request just after answering it
    with open(log, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def run_case(stock: StockClient, case: Case, sc: Scenario, log: Path) -> tuple[Verdict, float]:
    if case.na:
        return Verdict(NA, case.na), 0.0
    missing = sorted(_fields(case.args, case.stdin, case.expect) - sc.values.keys())
    if missing:
        why = "; ".join(sc.failures) or "not made"
        return Verdict(FAILS, f"blocked: no {', '.join(missing)} ({why})"[:300], "blocked"), 0.0
    v = sc.values
    argv = case.path.split() + shlex.split(case.args.format(**v))
    stdin = case.stdin.format(**v) if case.stdin else None
    expect = case.expect.format(**{k: re.escape(x) for k, x in v.items()}) if case.expect else None
    mark = _log_size(log)
    out = stock.det(argv, stdin=stdin, timeout=case.timeout)
    answered = master_errors(_log_since(log, mark))
    transcript = Path(v["work"]) / "cli" / (case.path.replace(" ", "_") + ".txt")
    transcript.parent.mkdir(exist_ok=True)
    transcript.write_text(f"$ det {shlex.join(argv)}\nexit {out.rc} in {out.seconds:.1f}s"
                          f"{' (timed out)' if out.timed_out else ''}\nmaster errors: "
                          f"{answered}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}")
    return classify_cli(out.rc, out.stdout, out.stderr, timed_out=out.timed_out, expect=expect,
                        answered=answered), out.seconds


def run_cli(stock: StockClient, sc: Scenario, log: Path) -> list[Row]:
    leaves = cli_leaves(stock)
    cases = {c.path: c for c in CASES}
    unknown = sorted(cases.keys() - set(leaves))
    if unknown:
        print(f"warning: cases for commands the stock CLI does not have: {unknown}",
              file=sys.stderr)
    helps = [Case(p, expect="usage") for p in leaves if p.split()[-1] == "help"]
    order = helps + [c for c in CASES if c.path in leaves]
    order += [Case(p) for p in leaves if p not in cases and p.split()[-1] != "help"]
    rows = []
    for case in order:
        if case.path in cases or case in helps:
            verdict, secs = run_case(stock, case, sc, log)
        else:
            verdict, secs = Verdict(FAILS, "no case written for this command", "other"), 0.0
        words = case.path.split()
        group = f"det {words[0]}" if len(words) > 1 else "det"
        rows.append(Row(group, f"det {case.path}", verdict.status, verdict.note, verdict.cause,
                        secs, case.args if not case.na else ""))
        print(f"  {verdict.status:5} {secs:5.1f}s det {case.path}"
              + (f"  -- {verdict.note}" if verdict.status == FAILS else ""), flush=True)
    return rows


def run_sdk(stock: StockClient, sc: Scenario, master: str, work: Path) -> tuple[list[Row], str]:
    scenario = work / "sdk-scenario.json"
    scenario.write_text(json.dumps({**sc.values, "master": master}))
    out = stock.run_python([str(PROBE), str(scenario)], timeout=1200)
    rows = []
    for line in out.stdout.splitlines():
        if not line.startswith("{"):
            continue
        got = json.loads(line)
        if "owner" not in got:
            continue
        note = got["note"]
        cause = cause_of(f"{note}\n{got.get('detail', '')}") if got["status"] == FAILS else ""
        if cause == "wrong output" or (got["status"] == FAILS and "implausible" in note):
            cause = "wrong output"
        owner = got["owner"]
        group = "determined.experimental.client (module functions)" if owner == "client" \
            else owner
        rows.append(Row(group, f"{owner}.{got['name']}", got["status"], note, cause))
        print(f"  {got['status']:5} {owner}.{got['name']}"
              + (f"  -- {note}" if got["status"] == FAILS else ""), flush=True)
    problem = ""
    if out.rc != 0 or out.timed_out:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        problem = f"the SDK probe exited {out.rc} (timed out: {out.timed_out}): {tail}"
    return rows, problem


def describe(sc: Scenario) -> list[str]:
    v = sc.values.get
    return [
        f"finished experiments {v('e_done')} (trial {v('t_done')}, checkpoints "
        f"`{v('ck_done_first')}`, `{v('ck_done')}`), {v('e_spare')} and {v('e_other')}: "
        "`tests/compat/fixtures/steps/train.py`, a stock Core API trial, 10 steps, a "
        "checkpoint every 5, run by the stock venv's python",
        f"running experiment {v('e_live')} (trial {v('t_live')}, job `{v('job_live')}`); "
        f"paused experiments {v('e_paused_a')} and {v('e_paused_b')}",
        "model `matrix-model` with a version (the last checkpoint of the finished experiment); "
        "workspace `matrix-ws` with project `matrix-proj`; user `matrix-user`; group "
        "`matrix-group`; template `matrix-tpl`; an access token of `matrix-user`",
        f"notebook `{v('nb')}`, commands `{v('cmd')}` and `{v('cmd_b')}` (`sleep 3600`), shell "
        f"`{v('sh')}` (all `--config resources.slots=0`), TensorBoard `{v('tb')}`",
        f"agent `{v('agent')}` with 2 CPU slots in pool `{v('pool')}`; the CLI runs as `admin` "
        "(DET_USER/DET_PASS) with a private HOME",
        "placeholders: " + ", ".join(
            f"`{{{k}}}` = `{x}`" for k, x in sorted(sc.values.items())
            if k in _fields(*(f for c in CASES for f in (c.args, c.stdin, c.expect)))
            and k not in _HIDDEN and not k.endswith(("_cfg", "_file"))),
        "`{steps_cfg}`, `{tpl_file}`, `{policy_file}`, `{task_file}`: files written by "
        "`_matrix_scenario.write_files`; `{work}`, `{steps_dir}`: a temporary directory and "
        "`tests/compat/fixtures/steps`",
    ]


_HIDDEN = {"admin_password", "token", "work", "steps_dir"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "compat-matrix.md")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    venv = Path(os.environ.get("DET_COMPAT_VENV") or REPO / ".venv-det")
    if not (venv / "bin" / "det").exists():
        raise SystemExit(f"no stock client at {venv}: pip install determined==0.38.1 there")
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="compat-matrix-"))
    # A second pool, empty, that workspaces may be bound to (the default pool cannot be).
    (tmp / "master.yaml").write_text(
        "resource_manager: {default_compute_resource_pool: default, default_aux_resource_pool: default}\n"
        "resource_pools: [{pool_name: default}, {pool_name: matrix-pool}]\n")
    master = MasterProcess(tmp / "master", extra_args=["--config", str(tmp / "master.yaml")])
    try:
        master.start()
        work = tmp / "work"
        work.mkdir()
        stock = StockClient(venv, tmp / "home", master.url, "admin", ADMIN_PASSWORD)
        print(f"master {master.url}; data in {tmp}", flush=True)
        print("setting up the scenario …", flush=True)
        sc = build(master, stock, work)
        for failure in sc.failures:
            print(f"  setup failed: {failure}", flush=True)
        product = master.admin().get("/info").get("det_jupyter_version", "?")
        print("CLI …", flush=True)
        cli = run_cli(stock, sc, master.log_path)
        print("SDK …", flush=True)
        sdk, problem = run_sdk(stock, sc, master.url, work)
    finally:
        master.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    header = [
        "Generated by `scripts/compat_matrix.py`; rerun with",
        "",
        "```bash",
        ".venv/bin/python scripts/compat_matrix.py      # needs .venv-det (determined==0.38.1)",
        "```",
        "",
        f"Last run {datetime.date.today().isoformat()}: det-jupyter {product}, stock "
        f"`determined==0.38.1` client, {minutes:.1f} minutes (a fresh master with 2 CPU slots).",
    ]
    failures = sc.failures + ([problem] if problem else [])
    args.out.write_text(render(cli, sdk, scenario=describe(sc), setup_failures=failures,
                               header=header))
    print(summary(cli, "CLI commands"))
    print(summary(sdk, "SDK methods"))
    print(f"wrote {args.out} in {minutes:.1f} minutes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
