"""A JSON column takes any value a request could carry and reads it back: a NaN or an infinity
(a config's ``.inf``, a metadata value) is stored as Determined's string for it, on SQLite and
on PostgreSQL, whose json type refuses the bare tokens."""

from __future__ import annotations

import math

import sqlalchemy as sa

from det_jupyter.store._engine import store_json


def test_non_finite_floats_become_determineds_strings() -> None:
    assert store_json({"a": [math.nan, math.inf, -math.inf, 1.5]}) == '{"a": ["NaN", "Infinity", "-Infinity", 1.5]}'


def test_a_json_column_stores_and_reads_back_non_finite_values(engine: sa.Engine) -> None:
    table = sa.Table("json_values", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("v", sa.JSON))
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": 1, "v": {"lr": math.inf, "nested": [math.nan]}}])
    with engine.connect() as conn:
        assert conn.execute(sa.select(table.c.v)).scalar_one() == {"lr": "Infinity", "nested": ["NaN"]}
