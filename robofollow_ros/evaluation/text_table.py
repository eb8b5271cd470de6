"""Plain-text tables whose columns are as wide as their widest cell, so no two columns run together.

Every report view prints through :func:`text_table`: a fixed width chosen in advance is overrun as
soon as a value carries a sign, an interval or a long name (``--compare-runs`` printed its IS and ES
columns into each other that way). Columns are separated by two spaces and cells are written
without inner double spaces, so a reader (or a test) can split a row on two spaces.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Column separator; cells never contain it.
GAP = "  "


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """Header, a rule and the rows; ``right[i]`` right-aligns column i (numbers), else left-aligned."""
    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"text_table: every row needs {len(header)} cells")
    align = list(right) if right is not None else [False] * len(header)
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if a else c.ljust(w) for c, w, a in zip(cells, widths, align, strict=True)]
        return GAP.join(parts).rstrip()

    head = line(header)
    return "\n".join([head, "-" * len(head), *(line(r) for r in rows)])
