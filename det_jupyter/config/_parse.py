"""YAML text → config dict, with errors that point at the line and column."""

from __future__ import annotations

from typing import Any

from det_jupyter.errors import InvalidConfig

from ._util import type_name
from ._yaml import load_yaml


def parse_yaml(text: str) -> dict[str, Any]:
    """Parse experiment-config YAML text into a dict.

    Raises ``InvalidConfig`` for empty text, malformed YAML (naming line, column and the
    parser's complaint), text over ``load_yaml``'s limits (``PayloadTooLarge`` for its size)
    or a document whose top level is not a mapping.
    """
    if not text or not text.strip():
        raise InvalidConfig(
            "the experiment config is empty; provide a YAML mapping with at least "
            "`entrypoint` and `searcher`"
        )
    data = load_yaml(text, what="the experiment config")
    if data is None:
        raise InvalidConfig(
            "the experiment config is empty (only comments or blank lines); provide a YAML "
            "mapping with at least `entrypoint` and `searcher`"
        )
    if not isinstance(data, dict):
        raise InvalidConfig(
            f"the experiment config must be a YAML mapping at the top level, got "
            f"{type_name(data)}; write `key: value` lines such as `entrypoint: python3 train.py`"
        )
    for key in data:
        if not isinstance(key, str):
            raise InvalidConfig(
                f"the experiment config has a non-string top-level key {key!r}; "
                "top-level keys must be names such as `searcher`",
            )
    return data
