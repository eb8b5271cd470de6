"""User policies load as users expect (issue 24, item 5), from the real ``robofollow`` console script:

* ``module:function`` finds a module in the directory the command runs in, as ``python -m`` would (the
  console script leaves that directory off ``sys.path``), in the evaluator's worker processes too;
* a module found nowhere is one line naming it, the directory looked in and ``PYTHONPATH`` (exit 2);
* every check of SPEC, kwargs and the policy's construction runs before the run directory is created:
  a failed start leaves nothing behind, so the corrected command is not refused. ``bringup`` likewise.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OK
from test_cli_tasks import ROBOFOLLOW

pytestmark = pytest.mark.timeout(300)

SELECTION = ["--tasks", "L0_pickup_red_cylinder", "--rounds", "1", "--max-steps", "1", "--actions-per-step", "5",
             "--no-render"]

#: A user's policy module, as a user writes one beside their command.
USER_POLICY = textwrap.dedent("""
    import numpy as np

    class Still:
        def __init__(self, rows=5):
            self.rows = rows
        def reset(self):
            pass
        def set_instruction(self, text):
            pass
        def predict(self, obs):
            return np.repeat(np.asarray(obs["joint_action"]["vector"], dtype=np.float32)[None], self.rows, axis=0)

    def make(rows=5):
        if rows < 1:
            raise ValueError(f"rows: must be >= 1, got {rows}")
        return Still(rows)
""")


def _said(stderr: str) -> list[str]:
    """stderr's lines less progress lines (``… `` and what a wait is for, if it lasts seconds: issue 35)."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("… ")]


def _robofollow(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The console script run in ``cwd``; PYTHONPATH (if set) names the package under test, never ``cwd``."""
    assert str(cwd) not in os.environ.get("PYTHONPATH", "")
    return subprocess.run([ROBOFOLLOW, *args], cwd=cwd, capture_output=True, text=True, timeout=280)


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "my_policy.py").write_text(USER_POLICY)
    (folder / "broken_policy.py").write_text("import no_such_dependency_for_robofollow_tests\n")
    return folder


@pytest.mark.parametrize("backend", ["local", "inline"])
def test_a_module_in_the_current_directory_loads_from_the_console_script(user_dir: Path, backend: str) -> None:
    out = user_dir / "run"
    done = _robofollow(user_dir, "eval", "--policy", "my_policy:make", "--kwargs", '{"rows": 3}', *SELECTION,
                       "--backend", backend, "--output", str(out))
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert len(results) == 1 and "policy_error" not in results[0] and results[0]["frames"] == 1 + 3
    run = json.loads((out / "run.json").read_text())
    assert run["arguments"]["policy_factory"] == "my_policy:make" and run["policy"]["kwargs"] == {"rows": 3}


def test_a_missing_module_names_pythonpath_and_leaves_nothing(user_dir: Path) -> None:
    out = user_dir / "run"
    done = _robofollow(user_dir, "eval", "--policy", "no_such_policy_module:make", *SELECTION, "--output", str(out))
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    lines = _said(done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "'no_such_policy_module'" in lines[0] and str(user_dir) in lines[0] and "PYTHONPATH" in lines[0]
    assert not out.exists()


def test_a_module_whose_own_import_fails_says_so(user_dir: Path) -> None:
    done = _robofollow(user_dir, "eval", "--policy", "broken_policy:make", *SELECTION, "--output",
                       str(user_dir / "run"))
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert "importing module 'broken_policy' failed" in done.stderr
    assert "no_such_dependency_for_robofollow_tests" in done.stderr and "a module it imports is missing" in done.stderr
    assert not (user_dir / "run").exists()


@pytest.mark.parametrize(("args", "words"), [
    (["--policy", "no_such_policy_module:make"], ["no_such_policy_module", "PYTHONPATH"]),
    (["--policy", "my_policy:nothing_here"], ["my_policy", "no callable 'nothing_here'"]),
    (["--policy", "my_policy:make", "--kwargs", '{"colour": "red"}'], ["bad kwargs", "colour"]),
    (["--policy", "my_policy:make", "--kwargs", '{"rows": 0}'], ["rows: must be >= 1, got 0"]),  # the factory raised
    (["--policy", "my_policy:make", "--kwargs", "[1]"], ["--kwargs", "JSON object"]),
    (["--policy", "hold", "--kwargs", '{"chunk": 3}'], ["policy spec 'hold'", "chunk"]),
])
@pytest.mark.parametrize("backend", ["local", "inline"])
def test_a_bad_spec_or_kwargs_leaves_no_run_directory_and_the_fix_runs(user_dir: Path, args: list[str],
                                                                       words: list[str], backend: str) -> None:
    out = user_dir / "run"
    done = _robofollow(user_dir, "eval", *args, *SELECTION, "--backend", backend, "--output", str(out))
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    lines = _said(done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert not out.exists()  # nothing behind: the corrected command is not refused
    if args[1] == "my_policy:make" and backend == "inline":
        fixed = _robofollow(user_dir, "eval", "--policy", "my_policy:make", *SELECTION, "--backend", backend,
                            "--output", str(out))
        assert fixed.returncode == EXIT_OK, fixed.stderr[-3000:]


@pytest.mark.parametrize(("args", "words"), [
    (["--policy", "no_such_policy_module:make"], ["no_such_policy_module", "PYTHONPATH"]),
    (["--policy", "my_policy:make", "--kwargs", '{"rows": 0}'], ["rows: must be >= 1, got 0"]),
])
def test_bringup_checks_the_policy_before_it_creates_its_output(user_dir: Path, args: list[str],
                                                                words: list[str]) -> None:
    out = user_dir / "run"
    done = _robofollow(user_dir, "bringup", "sim", *args, "--tasks", "L0_pickup_red_cylinder", "--rounds", "1",
                       "--no-foxglove", "--exit-when-done", "--output", str(out))
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and len(_said(done.stderr)) == 1, done.stderr
    for word in words:
        assert word in done.stderr
    assert not out.exists()


# -- remote SPECs: one table of wire clients (policy/remote.py) --------------------------------------
def test_a_remote_spec_parses_into_address_path_and_options():
    from robofollow_ros.policy.remote import REMOTE_CLIENTS, RemoteClient, parse_remote

    REMOTE_CLIENTS["probe"] = RemoteClient("x:Y", "a test row", url_options=True)
    try:
        remote = parse_remote("probe://[::1]:8000/v1/robot?dialect=roboarena&session_id=a1")
        assert remote is not None
        assert (remote.host, remote.port, remote.path) == ("::1", 8000, "/v1/robot")
        assert remote.options == {"dialect": "roboarena", "session_id": "a1"}
        assert remote.client_kwargs({"timeout_s": 5}) == {"host": "::1", "port": 8000, "path": "/v1/robot",
                                                          "dialect": "roboarena", "session_id": "a1", "timeout_s": 5}
        with pytest.raises(ValueError, match="session_id given both in the URL and in --kwargs"):
            remote.client_kwargs({"session_id": "b"})
    finally:
        del REMOTE_CLIENTS["probe"]


@pytest.mark.parametrize("spec, words", [
    ("gopher://127.0.0.1:70", ["unknown scheme 'gopher'", "tcp://HOST:PORT"]),
    ("tcp://127.0.0.1:8999/path", ["tcp:// takes no path or query"]),
    ("openpi://127.0.0.1:8000?x=1", ["openpi://127.0.0.1:8000?x=1", "unexpected keyword argument 'x'"]),
    ("tcp://127.0.0.1:70000", ["port 70000 is outside 1..65535"]),
    ("tcp://127.0.0.1", ["expected tcp://HOST:PORT"]),
])
def test_a_bad_remote_spec_is_refused_naming_it(spec, words):
    from robofollow_ros.policy.spec import PolicySpecError, load_policy

    with pytest.raises(PolicySpecError) as info:
        load_policy(spec)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("command", ["eval", "serve"])
def test_help_lists_every_spec_form_from_the_one_table(command, capsys, monkeypatch):
    """``--help`` is generated from the SPEC tables, so a protocol added there is listed without a second edit."""
    from robofollow_ros.cli import build_parser
    from robofollow_ros.cli.serve import SERVERS
    from robofollow_ros.policy.remote import REMOTE_CLIENTS
    from robofollow_ros.policy.spec import builtin_names

    monkeypatch.setenv("COLUMNS", "10000")  # argparse wraps at hyphens ("vla-" / "eval://")
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for form in [*(f"{scheme}://HOST:PORT" for scheme in REMOTE_CLIENTS), "learned:CKPT", "module:function",
                 *builtin_names()]:
        assert form in text
    if command == "serve":
        for protocol in SERVERS:
            assert f"{protocol}:" in text
