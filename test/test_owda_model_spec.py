"""``owda eval --model module:function``: a user's decider plugs in as a policy does (issue 25, item 5).

Every run goes through the real ``robofollow`` console script in the directory that holds the user's
module (as ``test_policy_loading`` does for policies), over a small suite built on two anchors (one
object-centric, one action-sequence), and is scored by the real evaluator:

* a decider that is right by construction (it solves from the anchor and the instruction, all it is
  handed) scores 1.0 and a fixed-answer one scores lower, with decision sensitivity exactly 0;
* the reference and an operator-ablated reference give the same predictions and metrics through a
  factory as through the built-in SPECs, whichever answer form the factory's decider uses;
* a bad SPEC, bad kwargs or a failing factory is one line and exit 2 with nothing written; an answer
  that is no answer (wrong type, an exception, a hung call past ``--timeout``) is one line naming the
  model and the instance, exit 3; ids outside the decision space are scored wrong, not refused;
* ``run.json`` records the factory and its kwargs, and a rerun with other kwargs is refused.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.decisions.authoring import action_sequence_anchor, distinct_layouts, object_centric_anchor
from robofollow_ros.decisions.generator import generate_on_anchors
from robofollow_ros.decisions.suite_io import load_suite, write_suite
from robofollow_ros.decisions.user_decider import FactoryDecider
from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OK, EXIT_TRIALS_FAILED
from robofollow_ros.rundir.layout import METRICS_FILE, PREDICTIONS_FILE, RUN_FILE
from said import error_lines
from test_cli_tasks import ROBOFOLLOW

pytestmark = pytest.mark.timeout(240)

#: The user's decider module, written beside the command as a user would.
USER_DECIDERS = textwrap.dedent('''
    import json
    import threading

    from robofollow_ros.decisions.deciders import ReferenceDecider
    from robofollow_ros.decisions.language import parse
    from robofollow_ros.decisions.solver import solve


    class Solver:
        """Right by construction, from what it is handed: the anchor and the instruction."""
        def __init__(self, as_reply):
            self.as_reply = as_reply
        def decide(self, anchor, instruction):
            ids = list(solve(anchor, parse(anchor, instruction)))
            return json.dumps({"decision": ids}) if self.as_reply else ids


    class Fixed:
        def __init__(self, value):
            self.value = value
        def decide(self, anchor, instruction):
            return self.value(anchor) if callable(self.value) else self.value


    class Hung:
        def decide(self, anchor, instruction):
            threading.Event().wait()  # a model that never answers


    class Broken:
        def decide(self, anchor, instruction):
            raise RuntimeError("CUDA out of memory")


    def right(as_reply=False):
        return Solver(as_reply)

    def first_candidate():
        return Fixed(lambda anchor: [anchor.candidate_ids[0]])

    def ablated(op):
        return ReferenceDecider(ignore=op)   # a built-in decider, returned by a factory

    def answers(value):
        return Fixed(value)

    def hung():
        return Hung()

    def broken():
        return Broken()

    def not_a_decider():
        return object()

    def refuses(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
''')


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's folder: the decider module and a small suite (atomic families on two anchors)."""
    folder = tmp_path_factory.mktemp("work")
    (folder / "my_deciders.py").write_text(USER_DECIDERS)
    layouts = distinct_layouts()
    rng = random.Random("owda-model-spec")
    anchors = [object_centric_anchor("oc_test", layouts[0], rng), action_sequence_anchor("as_test", layouts[1], 7, rng)]
    suite = generate_on_anchors(anchors, 6, 0)
    assert {f.ops for f in suite.families} == {("N",), ("E",), ("Q",), ("T",)}  # every operator is exercised
    write_suite(suite, folder / "suite")
    return folder


def _owda_eval(cwd: Path, out: str, model: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """The console script run in ``cwd``; PYTHONPATH (if set) names the package under test, never ``cwd``."""
    assert str(cwd) not in os.environ.get("PYTHONPATH", "")
    return subprocess.run([ROBOFOLLOW, "owda", "eval", "--suite", "suite", "--output", out, "--model", model, *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def _scored(cwd: Path, out: str, model: str, *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    done = _owda_eval(cwd, out, model, *extra)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    metrics = json.loads((cwd / out / METRICS_FILE).read_text())
    rows = [json.loads(line) for line in (cwd / out / PREDICTIONS_FILE).read_text().splitlines()]
    return metrics, rows


def _one_line(done: subprocess.CompletedProcess[str], status: int) -> str:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == status, done.stderr[-3000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


def test_a_right_decider_scores_one_and_a_fixed_one_scores_lower(user_dir: Path) -> None:
    right, rows = _scored(user_dir, "right", "my_deciders:right")
    m = right["metrics"]
    assert len(rows) == m["instances"] == 48 and all(r["correct"] for r in rows)
    assert m["atomic_accuracy"]["value"] == 1.0
    assert m["decision_invariance"]["value"] == 1.0 and m["decision_sensitivity"]["value"] == 1.0
    assert m["answers"] == {"ok": 48, "format_failure": 0, "invalid_decision": 0, "missing": 0}
    fixed, _ = _scored(user_dir, "fixed", "my_deciders:first_candidate")
    f = fixed["metrics"]
    assert f["atomic_accuracy"]["value"] < 0.5
    assert f["decision_sensitivity"]["value"] == 0.0  # one answer to every wording: never changes when it must
    for name in ("N", "E", "Q", "T"):
        assert f["atomic_by_op"][name]["value"] < m["atomic_by_op"][name]["value"] == 1.0
    # the run records the factory and its kwargs, as eval's run.json does for a policy factory
    run = json.loads((user_dir / "right" / RUN_FILE).read_text())
    assert run["model"] == run["factory"] == "my_deciders:right" and run["kwargs"] == {}
    assert right["model"] == "my_deciders:right" and right["kwargs"] == {}


@pytest.mark.parametrize(("builtin", "factory", "kwargs"), [
    ("reference", "my_deciders:right", {}),                     # answers as a list of ids
    ("reference", "my_deciders:right", {"as_reply": True}),     # answers as a reply string
    ("ignore:N", "my_deciders:ablated", {"op": "N"}),           # a built-in's own Answer, via a factory
])
def test_the_same_decider_scores_the_same_through_a_factory_and_the_builtin(user_dir: Path, builtin: str,
                                                                          factory: str, kwargs: dict[str, Any]) -> None:
    tag = f"{builtin}-{factory}-{len(kwargs)}".replace(":", "_")
    ours, our_rows = _scored(user_dir, f"b-{tag}", builtin)
    theirs, their_rows = _scored(user_dir, f"f-{tag}", factory, "--model-kwargs", json.dumps(kwargs))
    assert theirs["metrics"] == ours["metrics"]
    keys = ("id", "status", "decision", "correct")
    assert [{k: r[k] for k in keys} for r in their_rows] == [{k: r[k] for k in keys} for r in our_rows]
    assert theirs["kwargs"] == kwargs and "kwargs" not in ours  # a built-in's run.json is as it was
    if builtin.startswith("ignore:"):  # the ablation is seen: it must lose exactly on N
        assert ours["metrics"]["atomic_by_op"]["N"]["value"] < 1.0 == ours["metrics"]["atomic_by_op"]["E"]["value"]


@pytest.mark.parametrize(("model", "kwargs", "words"), [
    ("no_such_decider_module:make", "{}", ["'no_such_decider_module'", "PYTHONPATH", "(the current directory)"]),
    ("my_deciders:nothing_here", "{}", ["--model 'my_deciders:nothing_here'", "no callable 'nothing_here'"]),
    ("my_deciders:not_a_decider", "{}", ["returned object", "no decide(anchor, instruction) method"]),
    ("my_deciders:refuses", '{"path": "x.pt"}', ["the factory raised FileNotFoundError", "no checkpoint at x.pt"]),
    ("my_deciders:right", '{"temperature": 0}', ["bad --model-kwargs", "temperature"]),
    ("my_deciders:right", "[1]", ["--model-kwargs", "JSON object"]),
    ("reference", '{"as_reply": true}', ["--model-kwargs", "only to a module:function factory"]),
    ("not-a-spec", "{}", ["unknown SPEC 'not-a-spec'", "module:function"]),
])
def test_a_bad_spec_is_one_line_exit_2_and_leaves_nothing(user_dir: Path, model: str, kwargs: str,
                                                          words: list[str]) -> None:
    line = _one_line(_owda_eval(user_dir, "bad", model, "--model-kwargs", kwargs), EXIT_BAD_INPUT)
    for word in words:
        assert word in line, line
    if model.startswith("no_such"):
        assert str(user_dir) in line  # the directory looked in
    assert not (user_dir / "bad").exists()


@pytest.mark.parametrize(("model", "kwargs", "words"), [
    ("my_deciders:answers", {"value": None}, ["decide() returned NoneType"]),
    ("my_deciders:answers", {"value": [1, 2]}, ["decide() returned a list holding int"]),
    ("my_deciders:broken", {}, ["decide() raised RuntimeError: CUDA out of memory"]),
    ("my_deciders:hung", {}, ["decide() gave no answer within --timeout 0.5 s"]),
])
def test_an_answer_that_is_no_answer_stops_the_run_naming_the_model_and_the_instance(
        user_dir: Path, tmp_path: Path, model: str, kwargs: dict[str, Any], words: list[str]) -> None:
    out = str(tmp_path / "out")
    started = time.monotonic()
    done = _owda_eval(user_dir, out, model, "--model-kwargs", json.dumps(kwargs), "--timeout", "0.5")
    line = _one_line(done, EXIT_TRIALS_FAILED)
    first = load_suite(user_dir / "suite").families[0].instances[0].instance_id
    assert f"model {model!r}" in line and f"instance {first}:" in line, line
    for word in words:
        assert word in line, line
    assert time.monotonic() - started < 60  # a hung decide() neither holds the run nor keeps the process alive
    assert (tmp_path / "out" / PREDICTIONS_FILE).read_text() == ""  # nothing scored for an item not answered


def test_answers_outside_the_decision_space_are_scored_wrong_as_a_chat_models_are(user_dir: Path,
                                                                                 tmp_path: Path) -> None:
    for value, status in ((["no_such_object"], "invalid_decision"), ([], "invalid_decision"),
                          ("I would take them all.", "format_failure")):
        out = tmp_path / status / str(len(value))
        metrics, rows = _scored(user_dir, str(out), "my_deciders:answers", "--model-kwargs",
                                json.dumps({"value": value}))
        assert {r["status"] for r in rows} == {status} and not any(r["correct"] for r in rows)
        assert metrics["metrics"]["answers"][status] == 48 and metrics["metrics"]["atomic_accuracy"]["value"] == 0.0


def test_a_rerun_resumes_only_with_the_same_factory_and_kwargs(user_dir: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    assert _owda_eval(user_dir, out, "my_deciders:right").returncode == EXIT_OK
    again = _owda_eval(user_dir, out, "my_deciders:right")  # everything answered: nothing is asked again
    assert again.returncode == EXIT_OK, again.stderr[-3000:]
    assert len((tmp_path / "out" / PREDICTIONS_FILE).read_text().splitlines()) == 48
    line = _one_line(_owda_eval(user_dir, out, "my_deciders:right", "--model-kwargs", '{"as_reply": true}'),
                     EXIT_BAD_INPUT)
    assert "kwargs" in line, line


def test_help_lists_every_model_form(user_dir: Path) -> None:
    done = subprocess.run([ROBOFOLLOW, "owda", "eval", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_OK, done.stderr
    text = " ".join(done.stdout.split())
    for form in ("reference", "ignore:N|E|Q|T", "openai:URL?model=NAME", "module:function", "--model-kwargs"):
        assert form in text, form


def test_the_decider_works_on_its_own_copy_of_the_anchor(user_dir: Path) -> None:
    """What a decider does to the anchor it is handed never reaches the anchor the answers are scored on."""
    anchor = load_suite(user_dir / "suite").anchors[0]
    before = copy.deepcopy(anchor.to_dict())
    seen = []

    class Vandal:
        def decide(self, handed: Any, instruction: str) -> list[str]:
            seen.append(handed)
            ids = list(handed.candidate_ids)
            object.__setattr__(handed, "objects", ())  # frozen dataclasses stop only the polite
            handed.provenance.clear()
            return ids[:1]

    decider = FactoryDecider("test:vandal", Vandal(), {}, timeout_s=10)
    answer = decider.decide(anchor, "pick up everything")
    assert answer.status == "ok" and answer.decision == (anchor.candidate_ids[0],)
    assert seen[0] is not anchor and anchor.to_dict() == before
    decider.decide(anchor, "pick up everything")  # the next call gets the same copy, as the decider left it
    assert seen[1] is seen[0] and anchor.to_dict() == before
