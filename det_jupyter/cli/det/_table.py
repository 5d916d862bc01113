"""A tiny table formatter for the ``det`` CLI: aligned columns, pure (values in, text out)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from det_jupyter.names import visible


def cell(value: Any) -> str:
    """How one value is shown: ``None`` blank, bools ``yes``/``no``, floats with at most 6
    significant digits, lists comma-joined, anything else ``str`` on one line (line breaks
    become spaces) with every other control or invisible character escaped (``\x1b``,
    ``\u202e``): a name from the master can neither move the cursor nor re-order the line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple, set)):
        return ", ".join(cell(v) for v in value)
    return visible(" ".join(str(value).splitlines()))


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Rows under headers, columns separated by `` | ``, a dashed rule under the headers.

    Numbers are right-aligned, everything else left-aligned; a row shorter than the headers
    is padded with blanks, a longer one is an error. No trailing spaces on any line.
    """
    headers = [cell(h) for h in headers]  # some are metric names, from the master
    width = len(headers)
    raw_rows = [list(r) for r in rows]
    for i, r in enumerate(raw_rows):
        if len(r) > width:
            raise ValueError(f"row {i} has {len(r)} values for {width} columns")
        r.extend([None] * (width - len(r)))
    texts = [[cell(v) for v in r] for r in raw_rows]
    widths = [max([len(h)] + [len(t[c]) for t in texts]) for c, h in enumerate(headers)]

    def line(values: Sequence[str], right: Sequence[bool]) -> str:
        parts = [v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)]
        return " | ".join(parts).rstrip()

    out = [line(list(headers), [False] * width), "-+-".join("-" * w for w in widths)]
    for raw, text in zip(raw_rows, texts, strict=True):
        out.append(line(text, [_numeric(v) for v in raw]))
    return "\n".join(out)


def format_pairs(pairs: Iterable[tuple[str, Any]]) -> str:
    """``key:  value`` lines with the values aligned (a record, e.g. ``det master info``)."""
    items = [(cell(k), cell(v)) for k, v in pairs]
    if not items:
        return ""
    width = max(len(k) for k, _ in items) + 1
    return "\n".join(f"{(k + ':').ljust(width)} {v}".rstrip() for k, v in items)
