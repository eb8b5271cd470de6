"""One YAML reader for profiles, driver maps, calibration and recordings: every failure names file and kind."""

from __future__ import annotations

import pytest

from robofollow_ros.rig.driver_config import load_driver_config
from robofollow_ros.yamlio import read_yaml_mapping


def test_mapping_is_returned(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("a: 1\nb: [2, 3]\n")
    assert read_yaml_mapping(path, "thing") == {"a": 1, "b": [2, 3]}


@pytest.mark.parametrize(("text", "words"), [
    (None, "does not exist (try sim)"),
    ("a: [1\n", "is not valid YAML"),
    ("- 1\n- 2\n", "must hold a mapping, got list"),
])
def test_each_failure_names_the_kind_and_the_file(tmp_path, text, words):
    path = tmp_path / "x.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(KeyError) as info:
        read_yaml_mapping(path, "profile", KeyError, hint="try sim")
    assert f"profile: {path}" in str(info.value) and words in str(info.value)


def test_driver_config_errors_come_from_the_shared_reader(tmp_path):
    with pytest.raises(ValueError, match=r"driver_config: .*nope\.yaml does not exist"):
        load_driver_config(tmp_path / "nope.yaml")
