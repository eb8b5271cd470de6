"""docs/benchmarks.md is shared by every benchmark: each rewrites only its own marked section."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def write_section(area: str, text: str, doc: Path = DOC) -> None:
    """Replace what stands between ``<!-- BEGIN area -->`` and ``<!-- END area -->`` (appended if absent)."""
    begin, end = f"<!-- BEGIN {area} -->", f"<!-- END {area} -->"
    current = doc.read_text(encoding="utf-8")
    if begin not in current or end not in current:
        current = current.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    head, rest = current.split(begin, 1)
    tail = rest.split(end, 1)[1]
    doc.write_text(f"{head}{begin}\n{text.rstrip(chr(10))}\n{end}{tail}", encoding="utf-8")
