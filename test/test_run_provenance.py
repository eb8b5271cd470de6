"""Runs say what they are, and ``--resume`` continues only the same run (issue 24, items 2, 3 and 7).

* ``run.json`` of a real ``robofollow eval`` holds every field of the official manifest under its official
  name (read from AutoLab-SAI-SJTU/RoboFollow at a867718: ``evaluate.py`` lines 115-122 and 151-157, with
  ``runinfo.metadata()``, ``runinfo.py`` lines 23-48) and our provenance beside them;
* a resume with any defining setting changed is refused naming the field and both values (exit 2), and
  changes nothing on disk; the same settings resume and complete; other code is recorded and warned about;
* SQLite's ``trial_index`` follows the plan with ``--workers 2`` even when trials finish out of order;
* ``robofollow report`` marks privileged runs and warns when a subset is printed beside published numbers.
Real console-script runs, real files, real SQLite, a real openpi server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation import provenance
from robofollow_ros.evaluation.provenance import RunSettings
from robofollow_ros.evaluation.report import PRIVILEGED_MARK
from robofollow_ros.evaluation.results import RunWriter
from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OK
from robofollow_ros.rundir import RunDirError
from robofollow_ros.rundir.layout import LOCK_FILE
from robofollow_ros.rundir.store import RunStore
from robofollow_ros.scoring import score_trajectory
from robofollow_ros.scoring.synthetic import Puppet
from said import error_lines
from test_cli_tasks import ROBOFOLLOW

pytestmark = pytest.mark.timeout(400)

ROOT = Path(__file__).resolve().parents[1]

#: Every top-level field the official evaluate.py writes into run.json: its ``run`` dict (lines 115-122),
#: ``**metadata()`` (runinfo.py:46-48) and, at the end, ``completed_trials`` (157); ``error`` only on failure.
OFFICIAL_RUN_FIELDS = ("status", "started_utc", "metric_version", "gate_mode", "runtime", "completion_metric_version",
                       "completion_aggregation", "stepper", "arguments", "selected_tasks", "expected_trials",
                       "upstream_commit", "code_sha256", "versions", "curobo_source_sha256", "config_sha256",
                       "asset_overrides", "completed_trials")
#: ``arguments`` is ``vars(args)`` of evaluate.py's parser (lines 43-68): every option, by its dest.
OFFICIAL_ARGUMENTS = ("scene", "levels", "tasks", "limit", "rounds", "base_seed", "max_steps", "actions_per_step",
                      "runtime", "direct_step", "sim_steps", "gpu", "output", "video", "video_fps", "remote",
                      "policy_factory", "policy_kwargs", "host", "port", "policy_timeout", "list", "dry_run")
#: runinfo.py:26-27.
OFFICIAL_VERSIONS = ("numpy", "sapien", "torch", "mplib", "toppra", "h5py", "transforms3d", "imageio",
                     "imageio-ffmpeg", "nvidia-curobo", "warp-lang")

TASKS = ["L0_pickup_yellow_block_1_left", "L0_pickup_red_cylinder"]  # plan order: scene1, then scene2
DYING = "robofollow_ros.policy.drills.scripted:dying"
BASE = ["--tasks", ",".join(TASKS), "--rounds", "1", "--max-steps", "1", "--actions-per-step", "5", "--no-render"]


def _eval(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, "eval", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.name != LOCK_FILE}


# -- run.json ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    done = _eval("--policy", "hold", "--kwargs", '{"chunk_size": 5}', *BASE, "--output", str(run))
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    return run


def test_run_json_holds_every_official_field_with_the_official_values(finished_run: Path) -> None:
    run = _json(finished_run / "run.json")
    assert [f for f in OFFICIAL_RUN_FIELDS if f not in run] == []
    assert list(run)[:11] == list(OFFICIAL_RUN_FIELDS[:11])  # in the official order, ours after them
    assert (run["status"], run["metric_version"], run["gate_mode"], run["runtime"], run["completion_metric_version"],
            run["completion_aggregation"], run["stepper"]) == (
        "complete", "strict", "strict", "fixed", "legacy-final-layout-v1", "task-macro", "robotwin-topp")
    started = dt.datetime.fromisoformat(run["started_utc"])
    assert started.utcoffset() == dt.timedelta(0)  # datetime.now(timezone.utc).isoformat(), as evaluate.py:115
    assert run["selected_tasks"] == [{"scene": "scene1", "task": TASKS[0]}, {"scene": "scene2", "task": TASKS[1]}]
    assert run["expected_trials"] == run["completed_trials"] == 2
    arguments = run["arguments"]
    assert list(arguments)[: len(OFFICIAL_ARGUMENTS)] == list(OFFICIAL_ARGUMENTS)
    assert {k: arguments[k] for k in ("scene", "levels", "tasks", "limit", "rounds", "base_seed", "max_steps",
                                      "actions_per_step", "runtime", "direct_step", "sim_steps", "video", "remote",
                                      "policy_factory", "policy_kwargs", "policy_timeout", "list", "dry_run")} == {
        "scene": "all", "levels": "L0,L1,L2,L3", "tasks": ",".join(TASKS), "limit": None, "rounds": 1,
        "base_seed": 42, "max_steps": 1, "actions_per_step": 5, "runtime": "fixed", "direct_step": False,
        "sim_steps": 15, "video": False, "remote": False, "policy_factory": "robofollow_ros.policy.spec:_hold",
        "policy_kwargs": '{"chunk_size": 5}', "policy_timeout": 300.0, "list": False, "dry_run": False}
    assert [p for p in OFFICIAL_VERSIONS if p not in run["versions"]] == []
    assert run["curobo_source_sha256"] is None  # no cuRobo here
    # the official hashes its embodiment configs; ours are the active rig's files (the built-in rig here)
    assert set(run["config_sha256"]) == {"config/robot/rig.yaml", "urdf/robofollow_rig.urdf"}
    assert run["rig"]["name"] == "robofollow"
    assert run["asset_overrides"] == {"version": 1, "files": []}


def test_run_json_says_what_ran(finished_run: Path) -> None:
    run = _json(finished_run / "run.json")
    assert run["schema_version"] == provenance.RUN_SCHEMA_VERSION
    assert run["policy"] == {"spec": "hold", "kwargs": {"chunk_size": 5}, "server_metadata": None,
                             "observation_keys": ["observation.head_camera.rgb", "observation.left_camera.rgb",
                                                  "observation.right_camera.rgb", "joint_action.vector", "instruction"]}
    assert (run["privileged"], run["max_steps"], run["actions_per_step"]) == (False, 1, 5)
    assert run["render"]["enabled"] is False and run["seeds"]["base_seed"] == 42
    for package in ("sapien", "rclpy", "torch", "foxglove-sdk"):
        assert run["versions"][package] == metadata.version(package)
    assert run["package"] == {"name": "robofollow_ros", "version": metadata.version("robofollow_ros")}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert run["git"]["commit"] == run["upstream_commit"] == head.stdout.strip()
    assert isinstance(run["git"]["dirty"], bool)
    assert run["code_sha256"] == provenance.code_sha256()
    assert run["python"] == platform.python_version() and run["platform"]["system"] == platform.system()
    assert run["reference"]["commit"].startswith("a867718") and run["resumes"] == []
    with sqlite3.connect(finished_run / "results.sqlite") as db:  # the store's row names the policy
        assert db.execute("SELECT model FROM runs").fetchall() == [("hold",)]


def test_the_recorded_constants_are_the_simulators() -> None:
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import DIRECT_STEPS

    assert provenance.SIM_STEPS == DIRECT_STEPS
    cameras = CameraSettings()
    render = provenance.render_settings(True)
    assert (render["width"], render["height"], render["depth"], render["segmentation"]) == (
        cameras.width, cameras.height, cameras.depth, cameras.segmentation)
    assert tuple(render["cameras"]) == cameras.cameras


@pytest.mark.parametrize("spec", ["hold", "learned:/x.pt", "openpi://127.0.0.1:9", "tcp://127.0.0.1:9"])
def test_the_official_policy_factory_names_what_load_policy_calls(spec: str) -> None:
    import importlib

    from robofollow_ros.policy.spec import factory_of

    target = factory_of(spec, {})
    if spec.startswith("tcp://"):  # the official --remote: host and port, no factory
        assert target["factory"] is None and target["remote"] == ("127.0.0.1", 9)
        return
    module, _, attr = target["factory"].partition(":")
    assert callable(getattr(importlib.import_module(module), attr))


def test_secrets_in_kwargs_are_not_written() -> None:
    assert provenance.redacted({"api_key": "s3cr3t", "host": "h", "token": None}) == {
        "api_key": "<redacted>", "host": "h", "token": None}
    args = provenance.official_arguments(policy="openpi://10.0.0.1:8000", policy_kwargs={"api_key": "s3cr3t"})
    assert "s3cr3t" not in json.dumps(args)


# -- resume -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A run whose evaluator was SIGKILLed at its first policy call (its policy killed the process: inline)."""
    base = tmp_path_factory.mktemp("killed")
    policy = ["--policy", DYING, "--kwargs", json.dumps({"mode": "sigkill", "once_marker": str(base / "killed")})]
    argv = [*policy, *BASE, "--backend", "inline"]
    done = _eval(*argv, "--output", str(base / "run"))
    assert done.returncode == -9, done.stderr[-3000:]
    run = _json(base / "run" / "run.json")
    assert run["status"] == "running" and _json(base / "run" / "results.json") == []
    return base / "run", argv


def _copy(killed: tuple[Path, list[str]], tmp_path: Path) -> Path:
    return Path(shutil.copytree(killed[0], tmp_path / "run"))


def _refused(run: Path, argv: list[str]) -> str:
    before = _files(run)
    done = _eval(*argv, "--output", str(run), "--resume")
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert _files(run) == before  # a refusal changes nothing on disk
    return lines[0]


def _with(argv: list[str], flag: str, *value: str) -> list[str]:
    """``argv`` with ``flag`` set to ``value`` (replaced where it is there, added where not)."""
    out = list(argv)
    if flag in out:
        at = out.index(flag)
        del out[at: at + 1 + len(value)]
    if flag == "--render":
        out.remove("--no-render")
    return [*out, flag, *value]


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--policy", ["hold"], [f'policy.spec "{DYING}" in the run, "hold" now']),
    ("--max-steps", ["2"], ["max_steps 1 in the run, 2 now"]),
    ("--actions-per-step", ["6"], ["actions_per_step 5 in the run, 6 now"]),
    ("--render", [], ['render (only the keys that differ) {"cameras": [], ', '"enabled": false', '"enabled": true']),
    ("--stepper", ["direct"], ['stepper "robotwin-topp" in the run, "direct" now']),
    ("--rounds", ["2"], ["expected_trials 2 in the run, 4 now"]),
    ("--tasks", [TASKS[0]], ["(expected_trials, selected_tasks differ: expected_trials 2 in the run, 1 now; ",
                             f'selected_tasks (first difference at #2: {{"scene": "scene2", "task": "{TASKS[1]}"}} in '
                             "the run, absent now) with 2 entries in the run, 1 now)"]),
])
def test_a_resume_with_a_defining_setting_changed_is_refused_naming_it(killed_run, tmp_path, flag, value,
                                                                       words) -> None:  # type: ignore[no-untyped-def]
    run = _copy(killed_run, tmp_path)
    line = _refused(run, _with(killed_run[1], flag, *value))
    assert f"--output: {run} holds another run (" in line, line
    for word in words:
        assert word in line, line


def test_a_resume_with_other_kwargs_is_refused_naming_both(killed_run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = _copy(killed_run, tmp_path)
    kwargs = json.loads(killed_run[1][killed_run[1].index("--kwargs") + 1])
    line = _refused(run, _with(killed_run[1], "--kwargs", json.dumps({**kwargs, "sleep_s": 5})))
    assert "(policy.kwargs differ: policy.kwargs " in line and '"sleep_s": 5' in line, line


@pytest.mark.parametrize(("field", "changed", "words"), [
    ("seeds", {"base_seed": 7}, ['seeds {"base_seed": 42, ', '{"base_seed": 7, ']),
    ("privileged", {"privileged": True}, ["privileged false in the run, true now"]),
])
def test_seeds_and_privileged_state_are_defining_too(tmp_path: Path, field: str, changed: dict[str, Any],
                                                     words: list[str]) -> None:
    task = default_registry().eval_task(TASKS[0])
    plan = {"selected_tasks": [(task.scene, task.task_id)], "expected_trials": 2, "stepper": "topp"}
    settings = RunSettings(policy="hold", max_steps=1, actions_per_step=5, render=False)
    writer = RunWriter(tmp_path / "run", arguments={}, settings=settings, **plan)
    writer.record_trial(score_trajectory(task, Puppet(task).hold(3).frames), task=task, round_index=1,
                        seed=task.seed(1))
    writer.close()  # as a killed run: still "running"
    before = _files(tmp_path / "run")
    other = dataclasses.replace(settings, **changed)
    with pytest.raises(RunDirError) as refused:
        RunWriter.resume(tmp_path / "run", arguments={}, settings=other, **plan)
    assert f"({field} differ: " in str(refused.value)
    for word in words:
        assert word in str(refused.value)
    assert _files(tmp_path / "run") == before
    with RunWriter.resume(tmp_path / "run", arguments={}, settings=settings, **plan) as same:
        assert same.recorded(task.task_id, 1)


def test_privileged_state_is_read_from_the_arguments(tmp_path: Path) -> None:
    with RunWriter(tmp_path / "given", arguments={"privileged": True, "policy": "oracle"},
                   selected_tasks=[("scene1", TASKS[0])], expected_trials=1):
        pass
    run = _json(tmp_path / "given" / "run.json")
    assert run["privileged"] is True and run["arguments"]["privileged"] is True
    assert run["policy"]["spec"] == "oracle" and run["policy"]["observation_keys"] is None  # not the evaluator's
    with RunWriter(tmp_path / "default", arguments={}, selected_tasks=[("scene1", TASKS[0])], expected_trials=1):
        pass
    assert _json(tmp_path / "default" / "run.json")["privileged"] is False
    evaluated = provenance.policy_record(RunSettings(policy="oracle", privileged=True))
    assert evaluated["observation_keys"][-3:] == ["privileged.task_id", "privileged.objects", "privileged.object_quats"]


def test_the_same_settings_resume_and_complete(killed_run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = _copy(killed_run, tmp_path)
    started = _json(run / "run.json")
    done = _eval(*killed_run[1], "--output", str(run), "--resume")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    assert "warning" not in done.stderr
    after = _json(run / "run.json")
    assert after["status"] == "complete" and after["completed_trials"] == 2
    assert [(r["task"], r["round"]) for r in _json(run / "results.json")] == [(t, 1) for t in TASKS]
    assert {k: after[k] for k in started if k not in ("status", "resumes")} == \
        {k: started[k] for k in started if k not in ("status", "resumes")}  # the start is kept as it was
    (resume,) = after["resumes"]
    assert resume["trials_before"] == 0 and resume["changed"] == {}
    assert resume["code_sha256"] == after["code_sha256"] and resume["arguments"]["resume"] is True
    assert dt.datetime.fromisoformat(resume["resumed_utc"]) >= dt.datetime.fromisoformat(after["started_utc"])


def test_a_resume_on_other_code_is_recorded_and_warned_about(killed_run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = _copy(killed_run, tmp_path)
    record = _json(run / "run.json")
    record.update(code_sha256="0" * 64, upstream_commit="1" * 40)  # as if an earlier commit had started it
    (run / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    done = _eval(*killed_run[1], "--output", str(run), "--resume")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    assert "warning: resuming on other code than the run started with (upstream_commit, code_sha256 differ)" in \
        done.stderr
    after = _json(run / "run.json")
    assert after["code_sha256"] == "0" * 64  # the start's, as it was
    changed = after["resumes"][0]["changed"]
    assert changed["code_sha256"] == {"run": "0" * 64, "now": provenance.code_sha256()}
    assert changed["upstream_commit"]["run"] == "1" * 40
    report = subprocess.run([ROBOFOLLOW, "report", str(run), "--compare", "PI05", "--no-plot"], capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert "resumed on other code than it started with (code_sha256, upstream_commit differ" in report.stdout


def test_a_run_of_an_older_layout_is_refused_naming_it(killed_run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = _copy(killed_run, tmp_path)
    record = _json(run / "run.json")
    del record["schema_version"]  # what every run.json before this layout lacks
    (run / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    line = _refused(run, killed_run[1])
    assert f"{run / 'run.json'} has run.json schema 1 (this robofollow_ros writes 2)" in line, line


# -- plan order in SQLite -----------------------------------------------------------------------------------
#: A policy that holds the first trial of the plan until the second one is recorded: the second finishes first.
GATE = textwrap.dedent("""
    import json, time
    from pathlib import Path
    import numpy as np

    class Gate:
        def __init__(self, wait_on, until, results):
            self.wait_on, self.until, self.results, self.text = wait_on, until, Path(results), ""
        def reset(self):
            pass
        def set_instruction(self, text):
            self.text = text
        def predict(self, obs):
            deadline = time.monotonic() + 200
            while self.text == self.wait_on and not self._recorded():
                if time.monotonic() > deadline:
                    raise RuntimeError("gate: the other trial was never recorded")
                time.sleep(0.05)
            return np.repeat(np.asarray(obs["joint_action"]["vector"], dtype=np.float32)[None], 5, axis=0)
        def _recorded(self):
            try:
                return any(r["task"] == self.until for r in json.loads(self.results.read_text()))
            except (OSError, ValueError):
                return False

    def gate(**kwargs):
        return Gate(**kwargs)
""")


def test_trial_index_follows_the_plan_when_trials_finish_out_of_order(tmp_path: Path) -> None:
    (tmp_path / "gate_policy.py").write_text(GATE)
    first = default_registry().eval_task(TASKS[0])
    run = tmp_path / "run"
    kwargs = {"wait_on": first.instruction, "until": TASKS[1], "results": str(run / "results.json")}
    done = _eval("--policy", "gate_policy:gate", "--kwargs", json.dumps(kwargs), *BASE, "--workers", "2",
                 "--output", str(run), cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    progress = [line for line in done.stderr.replace("\r", "\n").splitlines() if "trials" in line]
    assert TASKS[1] in next(line for line in progress if " 1/2 trials" in line)  # the second finished first
    with sqlite3.connect(run / "results.sqlite") as db:
        rows = db.execute("SELECT trial_index, task, round FROM trials ORDER BY trial_index").fetchall()
    assert [(task, rnd) for _, task, rnd in rows] == [(t, 1) for t in TASKS]  # plan order, not completion order
    assert [index for index, _, _ in rows] == [0, 10]  # task position x 10 + round - 1
    with RunStore(run / "results.sqlite") as store:
        assert [t["task"] for t in store.trials()] == [r["task"] for r in _json(run / "results.json")] == TASKS


# -- report ------------------------------------------------------------------------------------------------
def _report(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, "report", str(run), "--no-plot", *args], capture_output=True, text=True,
                          timeout=120)


def _small_run(path: Path, arguments: dict[str, Any]) -> Path:
    task = default_registry().eval_task(TASKS[0])
    with RunWriter(path, arguments=arguments, selected_tasks=[(task.scene, task.task_id)], expected_trials=1) as run:
        run.record_trial(score_trajectory(task, Puppet(task).hold(3).frames), task=task, round_index=1,
                         seed=task.seed(1))
    return path


def test_report_marks_a_privileged_run(tmp_path: Path) -> None:
    privileged = _small_run(tmp_path / "privileged", {"privileged": True})
    plain = _small_run(tmp_path / "plain", {})
    shown = _report(privileged)
    assert shown.returncode == 0, shown.stderr
    assert PRIVILEGED_MARK == "privileged — not comparable with published results"
    assert f"(IS/ES/CR, %) — {PRIVILEGED_MARK}" in shown.stdout.splitlines()[0]
    assert json.loads(_report(privileged, "--json").stdout)["privileged"] is True
    assert PRIVILEGED_MARK not in _report(plain).stdout
    assert json.loads(_report(plain, "--json").stdout)["privileged"] is False


def test_report_warns_when_a_subset_is_printed_beside_published_numbers(tmp_path: Path) -> None:
    run = _small_run(tmp_path / "run", {})
    alone = _report(run)
    assert alone.returncode == 0 and "warning" not in alone.stdout  # no published numbers, nothing to warn about
    beside = _report(run, "--compare", "PI05")
    assert beside.returncode == 0, beside.stderr
    warning = next(line for line in beside.stdout.splitlines() if line.startswith("warning:"))
    assert "a subset of the protocol: 1 of the" in warning and "1 of 10 rounds per task" in warning
    assert beside.stdout.index("warning:") < beside.stdout.index("published: PI05")


# -- a server's own metadata -------------------------------------------------------------------------------
@contextlib.contextmanager
def _openpi_server() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-m", "robofollow_ros.cli", "serve", "--protocol", "openpi", "--policy",
                             "hold", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Policy server: 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        yield int(line.rsplit(":", 1)[1])
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def test_an_openpi_servers_metadata_is_recorded(tmp_path: Path) -> None:
    with _openpi_server() as port:
        done = _eval("--policy", f"openpi://127.0.0.1:{port}", "--tasks", TASKS[1], "--rounds", "1", "--max-steps", "1",
                     "--actions-per-step", "5", "--render", "--output", str(tmp_path / "run"))
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    policy = _json(tmp_path / "run" / "run.json")["policy"]
    assert policy["server_metadata"] == {"policy": "hold"}  # what `robofollow serve --protocol openpi` announces
    assert policy["observation_keys"] == ["state", "images.cam_high", "images.cam_left_wrist", "images.cam_right_wrist",
                                          "prompt"]


@pytest.mark.parametrize("pacing", [None, {"mode": "lockstep"},
                                    {"mode": "rate", "execution": "realtime", "control_hz": 25.0, "merge": "ensemble",
                                     "sim_step_mode": "timer", "sim_step_hz": 25.0}])
def test_a_graph_runs_top_level_execution_is_the_pacing_its_trial_manager_recorded(pacing):
    """The ROS trial manager passes no RunSettings: run.json's ``execution`` must still say how rows were paced
    (a realtime graph run recorded as lock-step would be compared with the official evaluator's numbers)."""
    from robofollow_ros.evaluation.run_record import new_run_record

    arguments = {"policy": "oracle", "max_steps": 10, "actions_per_step": 50}
    if pacing is not None:
        arguments["execution"] = pacing
    run = new_run_record(arguments=arguments, selected_tasks=[("scene1", "L0_pickup_red_cylinder")],
                         expected_trials=1, stepper="topp")
    assert run["execution"] == (pacing or {"mode": "lockstep"})
