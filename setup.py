"""Build script accepted by both ``colcon build`` (ament_python) and ``pip install -e .``.

Data that ROS tools look up through the ament index (launch files, configs, URDF, calibration,
package.xml and the resource marker) is installed under ``share/robofollow_ros``.
"""

from __future__ import annotations

from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "robofollow_ros"
HERE = Path(__file__).resolve().parent


def node_entry_points() -> dict[str, str]:
    """The node executables, read from their one list without importing the package (or rclpy)."""
    namespace: dict[str, dict[str, str]] = {}
    exec((HERE / PACKAGE / "nodes" / "catalog.py").read_text(), namespace)
    return namespace["NODE_ENTRY_POINTS"]


#: Console scripts: the ``robofollow`` CLI and one executable per ROS node.
CONSOLE_SCRIPTS = [
    "robofollow = robofollow_ros.cli:main",
    *(f"{name} = {target}" for name, target in sorted(node_entry_points().items())),
]


def share_tree(folder: str) -> list[tuple[str, list[str]]]:
    """(destination, files) pairs that mirror ``folder`` under ``share/robofollow_ros``."""
    entries: dict[str, list[str]] = {}
    for path in sorted(glob(f"{folder}/**/*", recursive=True)):
        if Path(path).is_file():
            entries.setdefault(f"share/{PACKAGE}/{Path(path).parent}", []).append(path)
    return sorted(entries.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    # The shipped benchmark data folders are listed as (data-only) packages: setuptools warns about an
    # importable folder that is not in `packages`, and their files land beside the loader either way.
    packages=[*find_packages(exclude=["test", "test.*", "bench", "bench.*"]),
              f"{PACKAGE}.benchmark.data", f"{PACKAGE}.benchmark.data.tasks",
              f"{PACKAGE}.evaluation.view.assets"],  # `robofollow view`'s page, script and style
    package_data={f"{PACKAGE}.benchmark.data": ["*"], f"{PACKAGE}.benchmark.data.tasks": ["*"],
                  f"{PACKAGE}.evaluation.view.assets": ["*"]},
    include_package_data=True,
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "constraints.txt"]),  # `robofollow doctor` names constraints.txt
        *share_tree("launch"),
        *share_tree("config"),
        *share_tree("urdf"),
        *share_tree("calibration"),
    ],
    # Runtime dependencies come from package.xml (rosdep) in a ROS workspace and from requirements.txt in
    # a venv; listing them here would make `colcon build` try to fetch them. The pip-only ones:
    install_requires=["setuptools"],
    extras_require={"live": ["foxglove-sdk", "mcap"], "sim": ["sapien"],
                    "test": ["pytest", "pytest-timeout", "hypothesis", "openpi-client"]},
    zip_safe=False,
    maintainer="robofollow_ros developers",
    maintainer_email="robofollow-ros@example.org",
    description="Run RoboFollow and OWDA instruction-following benchmarks on a dual-arm rig or in SAPIEN.",
    license="Apache-2.0",
    python_requires=">=3.10",  # Humble (Ubuntu 22.04) runs 3.10, Jazzy 3.12; the venv of `make setup` 3.11
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
