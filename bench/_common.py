"""Shared helpers for the benchmark scripts: timing, ratios, peers in their own venvs, output.

Every benchmark prints exactly one JSON object on its last stdout line (its summary); progress
goes to stderr. Peers run as subprocesses of their own pinned virtual environments so their
dependencies never touch the product venv.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
if str(REPO) not in sys.path:  # for `tests._master` (the real master in a subprocess)
    sys.path.insert(0, str(REPO))
if str(REPO / "harness") not in sys.path:
    sys.path.insert(0, str(REPO / "harness"))

PEER_VENVS = {
    "mlflow": BENCH / ".venv-mlflow",
    "optuna": BENCH / ".venv-optuna",
    "ray": BENCH / ".venv-ray",
}
# The PostgreSQL server run_all.py benchmarks on: an admin connection (any existing database)
# through which each run creates, and afterwards drops, a database of its own.
PG_ADMIN_DSN = os.environ.get("DET_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
PEER_PINS = {
    "mlflow": ["mlflow-skinny==3.17.2", "sqlalchemy", "alembic", "matplotlib"],
    "optuna": ["optuna==5.0.0"],
    "ray": ["ray[tune]==2.60.0"],
}


def task_writable(path: Path) -> Path:
    """Make ``path`` (a directory of this run) a place tasks can write: they run as an
    unprivileged account, which must traverse every directory above it (a mkdtemp is 0700)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o1777)
    tmp = Path(tempfile.gettempdir()).resolve()
    for parent in path.resolve().parents:
        if tmp not in parent.parents:  # only this run's own directories, below the temp dir
            break
        mode = parent.stat().st_mode
        if parent.stat().st_uid == os.geteuid() and not mode & 0o001:
            parent.chmod((mode & 0o7777) | 0o111)
    return path


def log(*args: Any) -> None:
    """Progress for humans, on stderr so stdout stays one JSON line."""
    print(*args, file=sys.stderr, flush=True)


def emit(summary: dict[str, Any]) -> None:
    """Print the benchmark's one-line JSON summary."""
    print(json.dumps(summary, sort_keys=True, default=float), flush=True)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q / 100 * (len(s) - 1)))))
    return s[k]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def median_ratio(ours: list[float], theirs: list[float], *, higher_is_better: bool = True) -> float | None:
    """Median of per-pair ratios; > 1 means det-jupyter is better.

    Pairs are (ours[i], theirs[i]) from the same interleaved repetition.
    """
    ratios = []
    for a, b in zip(ours, theirs, strict=False):
        if a and b:
            ratios.append(a / b if higher_is_better else b / a)
    return median(ratios)


def peer_selected(name: str) -> bool:
    """Peers run by default except Ray; DET_BENCH_PEERS (comma list, or 'none') overrides."""
    raw = os.environ.get("DET_BENCH_PEERS")
    if raw is None:
        return name in ("mlflow", "optuna")
    return name in {p.strip() for p in raw.split(",")}


def peer_python(name: str) -> Path | None:
    """The peer venv's python, or None when it is not installed (run_all.py installs it)."""
    py = PEER_VENVS[name] / "bin" / "python"
    return py if py.exists() else None


def run_json(argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a command and parse the JSON object on its last stdout line."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines:
        raise RuntimeError(f"{argv[:3]} printed nothing:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def run_peer(name: str, script: str, args: list[str], *, timeout: float = 300) -> dict[str, Any]:
    """Run bench/peers/<script> in the peer's venv; returns its JSON summary."""
    py = peer_python(name)
    if py is None:
        raise RuntimeError(f"peer venv {PEER_VENVS[name]} is missing; run `python bench/run_all.py` "
                           f"to create it, or pip install {' '.join(PEER_PINS[name])} into it")
    return run_json([str(py), str(BENCH / "peers" / script), *args], timeout=timeout)


def time_import(python: str, code: str, n: int) -> list[float]:
    """Wall seconds of ``python -c code`` (a fresh process each), n times."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(REPO / "harness")})
        out.append(time.perf_counter() - t0)
    return out


def add_db_arg(ap: argparse.ArgumentParser) -> None:
    """The backend option shared by the benchmarks that run a master."""
    ap.add_argument("--db-url", default=None, metavar="URL",
                    help="run on PostgreSQL: an admin URL of the server (e.g. "
                         "postgresql://postgres@127.0.0.1:5432/test); a fresh database is created "
                         "on it for the run and dropped afterwards. Default: SQLite in a temp dir")


def backend(db_url: str | None) -> str:
    """The name the JSON summaries and the report use for a run's database."""
    return "postgresql" if db_url else "sqlite"


def master_rows(master: Any, sql: str) -> list[dict[str, Any]]:
    """Rows of a benchmark master's database, read beside it: its SQLite file read-only, or
    its PostgreSQL database through psycopg."""
    if master.db_url:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(libpq_url(master.db_url), row_factory=dict_row) as conn:
            return conn.execute(sql).fetchall()
    import sqlite3

    con = sqlite3.connect(f"file:{master.data_dir / 'det.db'}?mode=ro", uri=True, timeout=10)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(sql)]
    finally:
        con.close()


def libpq_url(url: str) -> str:
    """The URL psycopg accepts: SQLAlchemy's ``postgresql+psycopg://`` without the driver."""
    scheme, sep, rest = url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest


@contextmanager
def bench_database(admin_url: str | None) -> Iterator[str | None]:
    """A fresh PostgreSQL database on admin_url's server for one run (its URL), dropped on exit
    even when the run fails; None (SQLite) when admin_url is None."""
    if admin_url is None:
        yield None
        return
    import psycopg

    admin = libpq_url(admin_url)
    name = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    log(f"PostgreSQL database {name} for this run (dropped at its end)")
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database_copy(db_url: str | None, data_dir: Path, copy_dir: Path) -> Iterator[str | None]:
    """A copy of a stopped master's database as it is now, for a second master to serve: on
    SQLite its data directory copied to ``copy_dir`` (yields None); on PostgreSQL a database
    made from ``db_url``'s as a template (yields its URL), dropped on exit."""
    import shutil

    if db_url is None:
        shutil.copytree(data_dir, copy_dir)
        yield None
        return
    import psycopg

    url = libpq_url(db_url)
    server, source = url.rsplit("/", 1)
    name = source + "_copy"
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    try:
        yield db_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
