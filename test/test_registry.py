"""The task registry: counts, seeds and layouts match the spec; bad data is named precisely."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from robofollow_ros.benchmark import Registry, RegistryError, UnknownTaskError, trial_seed
from robofollow_ros.benchmark.loader import DATA_DIR
from robofollow_ros.benchmark.seeds import md5_32

EXPECTED_PER_SCENE = {
    "scene1": {"L0": 16, "L1": 8, "L2": 16, "L3": 76},
    "scene2": {"L0": 16, "L1": 24, "L2": 68, "L3": 24},
    "scene3": {"L0": 16, "L1": 40, "L2": 64, "L3": 96},
    "scene4": {"L0": 27, "L1": 14, "L2": 25, "L3": 24},
}


def test_counts_match_the_benchmark(registry):
    summary = registry.summary()
    assert summary["training_tasks"] == 75
    assert summary["instruction_variants"] == 229
    assert summary["evaluation_tasks"] == {"L0": 75, "L1": 86, "L2": 173, "L3": 220, "total": 554}
    assert summary["per_scene"] == EXPECTED_PER_SCENE
    assert summary["trials_full_protocol"] == 5540


def test_training_instruction_variants_per_scene(registry):
    per_scene = Counter()
    for task in registry.training:
        per_scene[task.scene] += len(task.instructions)
    assert per_scene == {"scene1": 48, "scene2": 52, "scene3": 48, "scene4": 81}
    five = sorted(t.task_id for t in registry.training if len(t.instructions) == 5)
    assert five == ["pickup_blue_cylinder", "pickup_red_cylinder"]


def test_scene_groups_hold_16_16_16_16_7_4(registry):
    assert sorted(registry.scene_groups().values()) == [4, 7, 16, 16, 16, 16]


def test_every_trial_seed_follows_the_rule(registry):
    trials = 0
    for task in registry.evaluation:
        for r in range(1, 11):
            expected = 42 + r * 100 + md5_32(task.task_id) % 1000
            assert task.seed(r) == expected == trial_seed(task.task_id, r)
            trials += 1
    assert trials == 5540


def test_seed_rule_example_and_bad_round(registry):
    task = registry.eval_task("L0_pickup_yellow_block_1_left")
    assert task.seeds[:2] == (539, 639)
    with pytest.raises(ValueError, match="round: 11"):
        task.seed(11)


def test_l0_uses_the_first_training_variant(registry):
    for task in registry.eval_tasks(level="L0"):
        training = registry.training_task(task.base_task_type)
        assert task.instruction == training.instructions[0], task.task_id


def test_every_task_names_objects_of_its_layout(registry):
    for task in registry.evaluation:
        names = registry.layout_of(task).names
        for name in (task.source, task.target, task.via, task.second_source):
            assert name is None or name in names, (task.task_id, name)


def test_scene4_expected_branches_and_l1_ids(registry):
    l1 = [t.task_id for t in registry.eval_tasks("scene4", "L1")]
    numbers = sorted(int(tid.split("_")[3]) for tid in l1)
    assert numbers == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15]  # 7 is missing upstream
    task = registry.eval_task(l1[0])
    assert task.layout == "scene4.4" and task.action == "stack_on_target" and task.arm == "right"


def test_layout_swaps_move_objects(registry):
    default = registry.layout("scene1", "default")
    s12 = registry.layout("scene1", "scene1_2")
    assert s12.object("red_sphere").nominal_xy == default.object("green_sphere").nominal_xy
    assert s12.object("green_sphere").nominal_xy == default.object("red_sphere").nominal_xy
    assert registry.layout("scene4", "scene4.1") is registry.layout("scene4", "scene4_1")


def test_jitter_is_deterministic_and_within_rules(registry):
    layout = registry.layout("scene1", "default")
    a, b = layout.jittered_xy(539), layout.jittered_xy(539)
    assert a == b
    assert a != layout.jittered_xy(540)
    for obj in layout.objects:
        x, y = a[obj.name]
        x0, y0 = obj.nominal_xy
        assert abs(x - x0) <= 0.015
        if obj.perturb.y_direction == "down":
            assert y0 - 0.015 <= y <= y0
        else:
            assert y0 <= y <= y0 + 0.015


def test_scene4_stacked_objects_follow_their_base(registry):
    layout = registry.layout("scene4", "scene4_1")
    xy = layout.jittered_xy(1234)
    assert xy["green_cylinder_top"] == xy["blue_cube_right"]
    assert xy["red_cube_in_bowl"] == xy["green_bowl"]
    assert layout.object("green_cylinder_top").spawn_z is None


def test_physics_and_roles(registry):
    s1 = registry.layout("scene1", "default")
    assert (s1.object("red_sphere").friction, s1.object("red_sphere").mass) == (2.0, 0.05)
    s2 = registry.layout("scene2", "default")
    assert s2.object("large_red_cylinder").friction == 0.12
    assert s2.object("green_bowl").role == "bowl" and not s2.object("green_bowl").is_candidate
    s3 = registry.layout("scene3", "default")
    assert s3.object("green_label_1").role == "label" and s3.object("green_label_1").is_static
    assert s1.object("yellow_block_1").spawn_z == pytest.approx(0.74 + 0.02 + 0.001)


def test_unknown_task_suggests_close_ids(registry):
    with pytest.raises(UnknownTaskError) as info:
        registry.eval_task("L0_pickup_yellow_block_1_lef")
    assert "L0_pickup_yellow_block_1_left" in info.value.suggestions
    assert "did you mean" in str(info.value)


def test_bad_scene_and_level_are_named(registry):
    with pytest.raises(ValueError, match="scene: 'scene5'"):
        registry.eval_tasks(scene="scene5")
    with pytest.raises(ValueError, match="level: 'L4'"):
        registry.eval_tasks(level="L4")


# -- validation of edited data ------------------------------------------------------------------


def _copy_data(tmp_path: Path) -> Path:
    dest = tmp_path / "data"
    shutil.copytree(DATA_DIR, dest)
    for path in dest.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)
    return dest


def _edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_checksum_catches_an_edited_file(tmp_path):
    data = _copy_data(tmp_path)
    _edit(data / "evaluation_tasks.json", lambda d: d[0].update(instruction="Do something else."))
    with pytest.raises(RegistryError, match=r"evaluation_tasks.json.*sha256"):
        Registry.load(data)


@pytest.mark.parametrize(
    ("change", "record", "field"),
    [
        (lambda d: d[3].update(source="purple_block"), "L0_pickup_yellow_block_3", "source"),
        (lambda d: d[1].update(task_id=d[0]["task_id"]), "L0_pickup_yellow_block_1_left", "task_id"),
        (lambda d: d[2].update(level="L7"), "L0_pickup_yellow_block_2", "level"),
        (lambda d: d[0].update(arm="middle"), "L0_pickup_yellow_block_1_left", "arm"),
        (
            lambda d: d[0].update(seeds_base42_rounds10=[1] * 10),
            "L0_pickup_yellow_block_1_left",
            "seeds_base42_rounds10",
        ),
        (lambda d: d[0].update(layout="scene1_9"), "L0_pickup_yellow_block_1_left", "layout"),
    ],
)
def test_bad_evaluation_records_are_named(tmp_path, change, record, field):
    data = _copy_data(tmp_path)
    _edit(data / "evaluation_tasks.json", change)
    with pytest.raises(RegistryError) as info:
        Registry.load(data, verify=False)
    err = info.value
    assert (err.file, err.record, err.field) == ("evaluation_tasks.json", record, field)
    assert "evaluation_tasks.json" in str(err) and field in str(err)


def test_unknown_object_in_a_layout_is_named(tmp_path):
    data = _copy_data(tmp_path)
    _edit(data / "layouts.json", lambda d: d["scene4"]["scene4_1"]["objects"][3].update(on_top_of="ghost_cube"))
    with pytest.raises(RegistryError, match=r"scene4/scene4_1/green_cylinder_top.*on_top_of.*ghost_cube"):
        Registry.load(data, verify=False)


def test_bad_size_is_named(tmp_path):
    data = _copy_data(tmp_path)
    _edit(data / "layouts.json", lambda d: d["scene2"]["default"]["objects"][0].update(size=[0.03]))
    with pytest.raises(RegistryError, match=r"scene2/default/large_red_cylinder.*'size'"):
        Registry.load(data, verify=False)
