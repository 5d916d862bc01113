"""The store: SQLAlchemy 2 Core tables, migrations and queries, on SQLite or PostgreSQL."""

from __future__ import annotations

from . import _tables as tables
from ._engine import make_engine, normalize_url, placeholder, reader, single_statement, sqlite_url
from ._migrate import migrate

__all__ = ["make_engine", "migrate", "normalize_url", "placeholder", "reader", "single_statement", "sqlite_url", "tables"]
