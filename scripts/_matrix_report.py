"""Write docs/compat-matrix.md from the compat matrix's rows (pure: rows in, text out)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from _matrix_classify import CAUSES, FAILS, NA, WORKS

_LABEL = {WORKS: "works", FAILS: "not yet", NA: "n/a"}


@dataclass(frozen=True)
class Row:
    group: str  # "det experiment" / "Experiment"
    name: str  # "det experiment describe" / "Experiment.reload"
    status: str
    note: str = ""
    cause: str = ""
    seconds: float = 0.0
    args: str = ""  # the CLI case's arguments, placeholders unfilled


def counts(rows: list[Row]) -> str:
    n = Counter(r.status for r in rows)
    return f"{n[WORKS]} of {len(rows)} work, {n[FAILS]} not yet, {n[NA]} not applicable"


def summary(rows: list[Row], what: str) -> str:
    return f"{what}: {counts(rows)}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(rows: list[Row], first: str, *, with_args: bool = False) -> list[str]:
    head = f"| {first} | arguments | status | note |" if with_args else \
        f"| {first} | status | note |"
    out = [head, "|---|---|---|---|" if with_args else "|---|---|---|"]
    for r in rows:
        note = f"{r.cause}: {r.note}" if r.status == FAILS and r.cause else r.note
        args = (f" `{_cell(r.args)}` |" if r.args else " |") if with_args else ""
        out.append(f"| `{_cell(r.name)}` |{args} {_LABEL[r.status]} | {_cell(note)} |")
    return out


def _by_cause(rows: list[Row]) -> list[str]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if r.status == FAILS:
            groups[r.cause or "other"].append(r)
    out = []
    for cause in CAUSES:
        if groups.get(cause):
            names = ", ".join(f"`{r.name}`" for r in groups[cause])
            out.append(f"- **{cause}** ({len(groups[cause])}; {CAUSES[cause]}): {names}")
    return out


def render(cli: list[Row], sdk: list[Row], *, scenario: list[str], setup_failures: list[str],
           header: list[str]) -> str:
    lines = ["# Stock client compatibility matrix", "", *header, "",
             f"- **{summary(cli, 'CLI commands')}**", f"- **{summary(sdk, 'SDK methods')}**", "",
             "**works**: ran against a fresh master with the arguments shown in "
             "`scripts/_matrix_cli_cases.py` (SDK: `scripts/_matrix_sdk_probe.py`), exited 0 "
             "(returned) with no error on stderr and, where the case names one, the output it "
             "should print. **not yet**: it did not; the note is the first line of the error. "
             "**n/a**: needs infrastructure det-jupyter does not have (the note says which). "
             "One call per command with one set of arguments: a command that works here can "
             "still fail with other flags.", "",
             "Arguments are shown as in the case table: `{e_done}` and the like are the ids of the "
             "scenario's objects below.", "",
             "## Scenario", "", *[f"- {s}" for s in scenario]]
    if setup_failures:
        lines += ["", "Setup steps that failed (commands needing their objects are "
                      "**blocked**):", "", *[f"- {_cell(f)}" for f in setup_failures]]
    lines += ["", "## Failures by cause", "", "### CLI", "", *(_by_cause(cli) or ["none"]),
              "", "### SDK", "", *(_by_cause(sdk) or ["none"]), "", "## CLI", ""]
    for group in sorted({r.group for r in cli}):
        part = sorted((r for r in cli if r.group == group), key=lambda r: r.name)
        lines += [f"### `{group}` ({counts(part)})", "",
                  *_table(part, "command", with_args=True), ""]
    lines += ["## SDK", ""]
    order = list(dict.fromkeys(r.group for r in sdk))
    for group in order:
        part = sorted((r for r in sdk if r.group == group), key=lambda r: r.name)
        lines += [f"### `{group}` ({counts(part)})", "", *_table(part, "method"), ""]
    return "\n".join(lines).rstrip() + "\n"
