"""``eval --no-render`` with a wire whose request holds camera images is refused at start, in one line
(issue 36): before, ``openpi://`` failed every trial with ``TypeError: int() argument must be ... not
'NoneType'``. Wires that carry no image need (``tcp://``, in process) are unaffected."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.evaluation.runner import EvalConfig
from robofollow_ros.exit_status import EXIT_BAD_INPUT
from robofollow_ros.policy.spec import PolicySpecError, check_render
from said import error_lines

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]


@pytest.mark.parametrize("spec", ["openpi://127.0.0.1:9", "openpi://127.0.0.1:9/ws?dialect=roboarena",
                                  "gr00t://127.0.0.1:9", "xpolicylab://127.0.0.1:9", "latency:20:openpi://127.0.0.1:9"])
def test_an_image_wire_without_rendering_is_refused_naming_the_flag(spec: str, tmp_path: Path) -> None:
    with pytest.raises(PolicySpecError, match=r"^--no-render: \w+://127\.0\.0\.1:9 needs camera images") as info:
        EvalConfig(policy=spec, output=tmp_path / "run", render=False)
    assert "\n" not in str(info.value)
    EvalConfig(policy=spec, output=tmp_path / "run", render=True)  # with the cameras: accepted


@pytest.mark.parametrize("spec", ["tcp://127.0.0.1:9", "memorizer", "latency:20:hold", "vla-eval://127.0.0.1:9"])
def test_wires_without_an_image_need_run_without_rendering(spec: str) -> None:
    check_render(spec, False)


def test_the_cli_refuses_at_start_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run([*ROBOFOLLOW, "eval", "--policy", "openpi://127.0.0.1:9", "--no-render",
                           "--tasks", "L0_s41_l_pick_yellow_cylinder", "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert len(error_lines(done.stderr)) == 1 and "Traceback" not in done.stderr
    assert "--no-render" in done.stderr and "openpi://127.0.0.1:9" in done.stderr
    assert not (out / "results.json").exists()
