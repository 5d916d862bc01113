#!/usr/bin/env python3
"""mypy over the whole tree against a baseline that may only shrink.

Runs mypy (the settings of ``[tool.mypy]`` in pyproject.toml, not strict) over ``det_jupyter``,
``det_agent`` and ``harness/det_harness``, counts the errors of each file and compares them with
``mypy-baseline.json``:

- a file with more errors than its baseline count, or with errors and no baseline entry,
  fails the run, and its errors are printed;
- a file with fewer errors passes, and the run says how to lower the baseline (``--update``),
  so the next change cannot spend the slack.

    scripts/mypy_baseline.py            # check (scripts/test.sh)
    scripts/mypy_baseline.py --update   # write the current counts to mypy-baseline.json

The packages held to ``mypy --strict`` (scripts/test.sh) are checked here too, and have no
entry. Exit status: 0 kept, 1 grown, 2 mypy itself failed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "mypy-baseline.json"
TARGETS = ("det_jupyter", "det_agent", "harness/det_harness")
#: ``path:line: error: message  [code]`` (mypy may put a column after the line)
_ERROR = re.compile(r"^(?P<path>[^:\n]+):\d+(?::\d+)?: error: ")


def run_mypy() -> tuple[int, list[str]]:
    """mypy's exit status and its output lines."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-pretty", "--no-error-summary", *TARGETS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, (proc.stdout + proc.stderr).splitlines()


def count_errors(lines: list[str]) -> Counter[str]:
    """Errors per file (POSIX paths relative to the repository); notes are not counted."""
    counts: Counter[str] = Counter()
    for line in lines:
        match = _ERROR.match(line)
        if match:
            counts[Path(match["path"]).as_posix()] += 1
    return counts


def compare(baseline: dict[str, int], current: Counter[str]) -> tuple[list[str], list[str]]:
    """(files whose count grew or that are new, files whose count shrank), each as a line."""
    grown = [
        f"{path}: {count} errors, baseline {baseline.get(path, 0)}"
        for path, count in sorted(current.items())
        if count > baseline.get(path, 0)
    ]
    shrunk = [
        f"{path}: {current.get(path, 0)} errors, baseline {count}"
        for path, count in sorted(baseline.items())
        if current.get(path, 0) < count
    ]
    return grown, shrunk


def write_baseline(current: Counter[str]) -> None:
    files = {path: current[path] for path in sorted(current)}
    data = {
        "_comment": "mypy errors per file, allowed to shrink only: scripts/mypy_baseline.py --update",
        "total": sum(files.values()),
        "files": files,
    }
    BASELINE.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the counts to the baseline")
    args = parser.parse_args(argv)

    status, lines = run_mypy()
    if status not in (0, 1):  # 2: a crash, a bad option, a syntax error
        print("\n".join(lines), file=sys.stderr)
        print(f"mypy_baseline: mypy failed (exit status {status})", file=sys.stderr)
        return 2
    current = count_errors(lines)
    total = sum(current.values())

    if args.update:
        write_baseline(current)
        print(f"mypy_baseline: wrote {BASELINE.name}: {total} errors in {len(current)} files")
        return 0

    if not BASELINE.exists():
        print(f"mypy_baseline: {BASELINE.name} is missing; run scripts/mypy_baseline.py --update")
        return 1
    baseline: dict[str, int] = json.loads(BASELINE.read_text(encoding="utf-8"))["files"]
    grown, shrunk = compare(baseline, current)
    if grown:
        print("mypy_baseline: new mypy errors (fix them; the baseline only shrinks):")
        for line in grown:
            print(f"  {line}")
        for line in lines:
            match = _ERROR.match(line)
            path = Path(match["path"]).as_posix() if match else None
            if path is not None and current[path] > baseline.get(path, 0):
                print(line)
        return 1
    print(f"mypy_baseline: {total} errors in {len(current)} files, none above the baseline "
          f"({sum(baseline.values())})")
    if shrunk:
        print("mypy_baseline: fewer errors than the baseline in:")
        for line in shrunk:
            print(f"  {line}")
        print("mypy_baseline: lower the baseline with `.venv/bin/python scripts/mypy_baseline.py "
              "--update` and commit mypy-baseline.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
