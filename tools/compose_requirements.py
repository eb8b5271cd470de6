"""Print a requirements file composed of a base file and overlays: each name an overlay pins replaces the base's
line(s) for that name (an overlay may give several, with environment markers); ``--drop NAME`` leaves a name out.

    python3 tools/compose_requirements.py requirements.txt requirements-kilted.txt --drop torch ray > reqs.txt

Used by tools/setup_matrix_envs.sh for .venv-py310, .venv-py312 and .venv-kilted; standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9_.-]*)")


def _name(line: str) -> str | None:
    """The normalised distribution name a requirement line pins; ``None`` for comments, blanks and options."""
    text = line.split("#", 1)[0].strip()
    match = _NAME.match(text) if text and not text.startswith("-") else None
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else None


def compose(base: list[str], overlays: list[list[str]], drop: set[str]) -> list[str]:
    """The requirement lines of ``base`` with the overlays' names replaced and ``drop`` left out."""
    drop = {re.sub(r"[-_.]+", "-", name).lower() for name in drop}
    replaced: dict[str, list[str]] = {}
    for overlay in overlays:
        for line in overlay:
            if (name := _name(line)) is not None:
                replaced.setdefault(name, []).append(line.split("#", 1)[0].strip())
    out: list[str] = []
    emitted: set[str] = set()
    for line in base:
        name = _name(line)
        if name is None or name in drop or name in emitted:
            continue
        out += replaced.get(name, [line.split("#", 1)[0].strip()])
        emitted.add(name)
    out += [line for name, lines in replaced.items() if name not in emitted and name not in drop for line in lines]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("overlays", type=Path, nargs="*")
    parser.add_argument("--drop", nargs="*", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    for path in (args.base, *args.overlays):
        if not path.is_file():
            print(f"error: requirements file {path}: no such file", file=sys.stderr)
            return 2
    lines = compose(args.base.read_text().splitlines(), [p.read_text().splitlines() for p in args.overlays],
                    set(args.drop))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
