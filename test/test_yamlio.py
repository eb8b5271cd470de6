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
    (b"name: caf\xe9\n", "is not UTF-8 text (byte 0xe9 at offset 9)"),  # Latin-1, as an editor may save it
    (b"a: 1\x00\n", "is not valid YAML"),  # a NUL: readable as UTF-8, not as YAML
    ("directory", "is a directory, not a YAML file"),
])
def test_each_failure_names_the_kind_and_the_file(tmp_path, text, words):
    path = tmp_path / "x.yaml"
    if text == "directory":
        path.mkdir()
    elif isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(KeyError) as info:
        read_yaml_mapping(path, "profile", KeyError, hint="try sim")
    message = info.value.args[0]
    assert f"profile: {path}" in message and words in message and "\n" not in message, message


def test_driver_config_errors_come_from_the_shared_reader(tmp_path):
    with pytest.raises(ValueError, match=r"driver_config: .*nope\.yaml does not exist"):
        load_driver_config(tmp_path / "nope.yaml")
