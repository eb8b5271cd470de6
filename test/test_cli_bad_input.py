"""Bad input to any ``robofollow`` subcommand is one line on stderr naming the option (or file) and the value,
exit status 2, before anything is written: never a traceback, never a silent default.

Every numeric option of every subcommand is range-checked at parse time by ``cli._common``'s helpers (an
absurd number used to be accepted and then broke every call: ``--frame-timeout inf``, ``report --bootstrap
10**12`` ran out of memory, ``--workers -3`` ...). Files and paths: ``test_cli_bad_files``.

Each case runs the real CLI as a subprocess; the sweep over every option parses in-process (one
``robofollow`` start costs most of a second and there are dozens of options)."""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import subprocess
import sys

import pytest

from robofollow_ros.cli import build_parser
from robofollow_ros.exit_status import EXIT_BAD_INPUT
from said import error_lines

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROBOFOLLOW, *args], capture_output=True, text=True, timeout=timeout)


def _one_line(done: subprocess.CompletedProcess[str], status: int = EXIT_BAD_INPUT) -> str:
    """The one stderr line of a refused command (asserting the status and that there is no traceback)."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == status, done.stderr[-3000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


# -- numbers ---------------------------------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser, prog: str = "robofollow"):  # type: ignore[no-untyped-def]
    """(prog, parser) of every leaf subcommand."""
    found = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found = True
            for name, sub in action.choices.items():
                yield from _subparsers(sub, f"{prog} {name}")
    if not found:
        yield prog, parser


def _numeric_actions():  # type: ignore[no-untyped-def]
    for prog, parser in _subparsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and (action.type in (int, float) or hasattr(action.type, "bounds")):
                yield prog, parser, action


NUMERIC = list(_numeric_actions())


def test_the_sweep_sees_the_numeric_options():
    progs = {prog for prog, _, _ in NUMERIC}
    assert {"robofollow eval", "robofollow serve", "robofollow report", "robofollow owda generate"} <= progs
    assert len(NUMERIC) > 50


@pytest.mark.parametrize(("prog", "option"), [(p, a.option_strings[-1]) for p, _, a in NUMERIC])
def test_every_numeric_option_uses_a_range_checked_type(prog, option):
    action = next(a for p, _, a in NUMERIC if p == prog and a.option_strings[-1] == option)
    assert hasattr(action.type, "bounds"), f"{prog} {option}: type={action.type!r}, not cli._common.integer/number"
    low, high = action.type.bounds
    assert math.isfinite(low) and math.isfinite(high) and low <= high


def _parse_error(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        parser.parse_args(argv)
    return int(info.value.code or 0), err.getvalue()


@pytest.mark.parametrize(("prog", "option"), [(p, a.option_strings[-1]) for p, _, a in NUMERIC])
def test_out_of_range_values_are_refused_at_parse_time_naming_option_and_value(prog, option):
    parser, action = next((pa, a) for p, pa, a in NUMERIC if p == prog and a.option_strings[-1] == option)
    if not hasattr(action.type, "bounds"):
        pytest.fail(f"{prog} {option}: type={action.type!r} has no range")
    low, high = action.type.bounds
    integral = isinstance(low, int) and isinstance(high, int)
    bad = [str(high + 1) if integral else repr(high * 2 + 1), str(low - 1), "nan", "inf", "1e309", "x"]
    for value in bad:
        code, stderr = _parse_error(parser, [option, value])
        lines = error_lines(stderr)
        assert code == EXIT_BAD_INPUT and len(lines) == 1, (value, stderr)
        assert lines[0].startswith(f"{prog}: error: argument {option}") and repr(value) in lines[0], (value, lines)
    for good in {high} if action.type.low_open else {low, high}:  # the bounds themselves are accepted
        value = str(good)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
            parser.parse_args([option, value])
        assert f"argument {option}" not in err.getvalue(), (value, err.getvalue())


#: (argv, option, value): the cases measured in the issue; OUT stands for a path the command must not create.
ISSUE_CASES = [
    (["serve", "--policy", "hold", "--frame-timeout", "inf"], "--frame-timeout", "inf"),
    (["serve", "--policy", "hold", "--idle-timeout", "1e300"], "--idle-timeout", "1e300"),
    (["serve", "--policy", "hold", "--policy-timeout", "1e309"], "--policy-timeout", "1e309"),
    (["eval", "--policy", "hold", "--output", "OUT", "--policy-timeout", "1e309"], "--policy-timeout", "1e309"),
    (["eval", "--policy", "hold", "--output", "OUT", "--max-steps", str(10**12)], "--max-steps", str(10**12)),
    (["eval", "--policy", "hold", "--output", "OUT", "--workers", "-3"], "--workers", "-3"),
    (["collect", "--output", "OUT", "--workers", "-3"], "--workers", "-3"),
    (["demo", "--output", "OUT", "--per-group", "0"], "--per-group", "0"),
    (["demo", "--output", "OUT", "--workers", "-3"], "--workers", "-3"),
    (["bringup", "mock", "--output", "OUT", "--max-steps", str(10**12)], "--max-steps", str(10**12)),
    (["report", "--compare-runs", "OUT", "OUT", "--bootstrap", str(10**12)], "--bootstrap", str(10**12)),
    (["owda", "generate", "--out", "OUT", "--per-anchor", "-1"], "--per-anchor", "-1"),
    (["record", "OUT/x.mcap", "--duration", "inf"], "--duration", "inf"),
]


@pytest.mark.parametrize(("argv", "option", "value"), ISSUE_CASES,
                         ids=[" ".join(c[0][:1] + c[0][-2:]) for c in ISSUE_CASES])
def test_absurd_numbers_from_the_issue_exit_2_naming_option_and_value(tmp_path, argv, option, value):
    out = tmp_path / "out"
    line = _one_line(_cli(*(a.replace("OUT", str(out)) for a in argv)))
    assert option in line and repr(value) in line, line
    assert not out.exists()


def test_per_anchor_without_anchors_is_refused_not_ignored(tmp_path):
    line = _one_line(_cli("owda", "generate", "--out", str(tmp_path / "suite"), "--per-anchor", "3"))
    assert "--per-anchor: 3" in line and "--anchors" in line, line
    assert not (tmp_path / "suite").exists()
