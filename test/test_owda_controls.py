"""OWDA under RoboFollow's control names: paraphrase = decision invariance, swap = decision sensitivity, blank =
the empty instruction (decisions/controls.py, docs/owda.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.controls import CONTROLS_FILE, parse_owda_controls
from robofollow_ros.decisions.deciders import load_decider
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.evaluate import format_report, run_evaluation
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.suite_io import write_suite


class Counting:
    """The reference decider, counting the calls (a rerun asks blank only for anchors not answered yet)."""

    def __init__(self) -> None:
        self.inner = load_decider("reference")
        self.name = self.inner.name
        self.calls: list[str] = []

    def decide(self, anchor, instruction):  # type: ignore[no-untyped-def]
        self.calls.append(instruction)
        return self.inner.decide(anchor, instruction)


def test_names_parse_like_robofollows_and_shuffled_is_refused_with_why() -> None:
    assert parse_owda_controls(None) == ("swap", "paraphrase")
    assert parse_owda_controls("paraphrase,blank") == ("blank", "paraphrase")
    with pytest.raises(OwdaError, match="shuffled does not apply"):
        parse_owda_controls("blank,shuffled")
    with pytest.raises(OwdaError, match="'bogus' is not one of"):
        parse_owda_controls("bogus")


def test_reference_is_invariant_sensitive_and_relies_on_the_words(owda_suite_seed0: Suite, tmp_path: Path) -> None:
    decider = Counting()
    result = run_evaluation(owda_suite_seed0, decider, tmp_path, controls=("blank", "swap", "paraphrase"))
    c = result["metrics"]["controls"]
    assert result["controls"] == ["blank", "swap", "paraphrase"]
    pairs = 2 * len(owda_suite_seed0.families)
    assert c["paraphrase"]["decision_invariance"]["value"] == 1.0 == c["paraphrase"]["same_decision"]["value"]
    assert c["paraphrase"]["decision_invariance"]["units"] == pairs
    assert c["swap"]["decision_sensitivity"]["value"] == 1.0 == c["swap"]["follows_new"]["value"]
    assert c["swap"]["keeps_old"]["value"] == 0.0 == c["swap"]["unchanged"]["value"]
    assert c["swap"]["keeps_old"]["units"] == pairs
    # the reference reads only the words: without them it decides nothing, so all its accuracy is reliance
    assert c["blank"]["accuracy_blank"]["value"] == 0.0 and c["blank"]["language_reliance"]["value"] == 1.0
    assert c["blank"]["anchors_asked"] == len(owda_suite_seed0.anchors) == c["blank"]["no_decision"]
    assert decider.calls.count("") == len(owda_suite_seed0.anchors)
    rows = [json.loads(line) for line in (tmp_path / CONTROLS_FILE).read_text().splitlines()]
    assert len(rows) == len(owda_suite_seed0.anchors) and rows[0]["control"] == "blank"
    assert "control swap (task-changing pairs" in format_report(result)
    again = Counting()  # a rerun resumes: nothing is asked again
    assert run_evaluation(owda_suite_seed0, again, tmp_path, controls=("blank",))["metrics"]["controls"].keys() \
        == {"blank"}
    assert again.calls == []


def test_a_decider_deaf_to_one_operator_leaves_its_decision_unchanged_on_swaps(owda_suite_seed0: Suite,
                                                                            tmp_path: Path) -> None:
    c = run_evaluation(owda_suite_seed0, load_decider("ignore:N"), tmp_path)["metrics"]["controls"]
    assert c.keys() == {"swap", "paraphrase"}  # the default asks the decider nothing more
    swap = c["swap"]
    assert swap["unchanged"]["value"] > 0.0 and swap["decision_sensitivity"]["value"] < 1.0
    assert swap["follows_new"]["value"] < 1.0
    lo, hi = swap["unchanged"]["ci95"]
    assert lo <= swap["unchanged"]["value"] <= hi


def test_the_cli_takes_controls_and_reports_them(owda_suite_seed0: Suite, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "suite"
    write_suite(owda_suite_seed0, suite)
    out = tmp_path / "out"
    assert main(["owda", "eval", "--suite", str(suite), "--model", "reference", "--output", str(out),
                 "--controls", "shuffled"]) == 2
    assert "shuffled does not apply" in capsys.readouterr().err and not out.exists()
    assert main(["owda", "eval", "--suite", str(suite), "--model", "reference", "--output", str(out),
                 "--controls", "blank,paraphrase"]) == 0
    text = capsys.readouterr().out
    assert "control blank" in text and "control paraphrase" in text and "control swap" not in text
    assert main(["owda", "report", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["controls"]["blank"]["language_reliance"]["value"] == 1.0
