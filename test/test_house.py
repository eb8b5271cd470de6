"""The house's rules, read from every module's imports (``ast``; nothing of the package is imported).

* Folders import only folders on lower floors (``FLOORS``, the README's "Architecture" section).
* No import circle between modules, counting imports inside functions and under ``TYPE_CHECKING``
  (a lazy import still ties two files together).
* The simulator is imported only by its own users: on the rig nothing may name ``robofollow_ros.sim``,
  since the rig's description lives below both in ``robot/``.
* A wire protocol imports no other protocol, and naming a policy costs neither torch nor SAPIEN.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "robofollow_ros"

#: The floors of the house, from the ground up: a folder (or top-level module) imports only from lower floors.
FLOORS = (
    ("contract", "paths", "yamlio", "jsonlimits", "exit_status", "child_process", "interrupts", "diagnostics"),
    ("benchmark", "robot", "rundir"),   # the benchmark's data, the rig's description, the run directory
    ("scoring", "sim"),                 # stage rules and the online monitor; the SAPIEN world
    ("rig", "policy", "monitoring"),    # arm-command safety and drivers; policies and their wires; live view
    ("evaluation", "preflight"),        # the headless evaluator; checks before the first trial
    ("datasets", "perception", "dry_run"),
    ("learning", "decisions"),          # training; OWDA
    ("nodes",),                         # the ROS 2 nodes (rclpy only here)
    ("bringup",),                       # profiles and running them without ros2 launch
    ("cli",),                           # the robofollow command
)

#: The simulator's own users: everything else runs on a rig without SAPIEN and must not name ``sim``.
SIM_USERS = (
    "robofollow_ros.sim",                          # the simulator itself
    "robofollow_ros.nodes.sim_node",               # the ROS node that plays the drivers in the sim profile
    "robofollow_ros.evaluation.trial_worker",      # the headless evaluator's workers
    "robofollow_ros.datasets.collect",             # demonstrations recorded in the simulator
    "robofollow_ros.datasets.demo",
    "robofollow_ros.decisions.capture",            # OWDA anchors captured from the simulator
    "robofollow_ros.decisions.sim_primitives",     # OWDA decisions executed in the simulator
    "robofollow_ros.perception.sim_eval",          # perception measured against simulator ground truth
    "robofollow_ros.perception.perturb_eval",
    "robofollow_ros.perception.calib_sim",         # calibration and colour calibration in the simulator
    "robofollow_ros.perception.colour_calib_sim",
    "robofollow_ros.cli.sim",                      # `robofollow sim snapshot`
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def imported_names(path: Path, name: str) -> Iterator[tuple[str, int]]:
    """What this file imports, at any depth (functions, ``TYPE_CHECKING``), with its line.

    ``from pkg import x`` gives ``pkg.x``: the submodule ``x`` when there is one (``pkg``'s own
    ``__init__`` is not a dependency then), otherwise a name that the graph maps to ``pkg``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:  # a submodule, or a name that the graph maps to its module
                yield f"{target}.{alias.name}", node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported module of this package: first line}; names that are not modules map to their module."""
    modules = all_modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for target, line in imported_names(path, name):
            if target == PACKAGE or not target.startswith(PACKAGE + "."):
                continue
            while target not in modules and "." in target:  # a name defined in a module, not a module
                target = target.rpartition(".")[0]
            if target in modules and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_only_the_simulators_own_users_import_it():
    offenders = []
    for module, edges in import_graph().items():
        if any(is_under(module, user) for user in SIM_USERS):
            continue
        for target, line in edges.items():
            if is_under(target, f"{PACKAGE}.sim"):
                offenders.append(f"{module} (line {line}) imports {target}")
    assert not offenders, "the rig side imports the simulator:\n" + "\n".join(offenders)


def test_the_allow_list_names_real_modules():
    modules = all_modules()
    assert [user for user in SIM_USERS if user not in modules] == []


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    members = set(component)
    ties = [f"  {a} (line {line}) -> {b}" for a in component for b, line in graph[a].items() if b in members]
    return "\n".join(ties)


def test_no_import_circle_between_modules():
    graph = import_graph()
    circles = strongly_connected(graph)
    assert not circles, "import circles:\n" + "\n\n".join(describe(c, graph) for c in circles)


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert strongly_connected(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("source, expected", [
    ("from . import world\n", "robofollow_ros.sim.world"),
    ("from ..robot.kinematics import RigKinematics\n", "robofollow_ros.robot.kinematics.RigKinematics"),
    ("from robofollow_ros.robot import kinematics\n", "robofollow_ros.robot.kinematics"),
    ("def f():\n    import robofollow_ros.sim.world\n", "robofollow_ros.sim.world"),
])
def test_imports_are_read_at_any_depth_and_relative(tmp_path, source, expected):
    path = tmp_path / "snapshot.py"
    path.write_text(source)
    assert expected in {target for target, _ in imported_names(path, "robofollow_ros.sim.snapshot")}


def test_a_name_maps_to_its_module_and_a_submodule_to_itself(tmp_path, monkeypatch):
    package = tmp_path / PACKAGE
    (package / "pkg").mkdir(parents=True)
    (package / "pkg" / "__init__.py").write_text("from robofollow_ros.pkg.a import A\n")
    (package / "pkg" / "a.py").write_text("from robofollow_ros.pkg import b\nA = 1\n")
    (package / "pkg" / "b.py").write_text("from robofollow_ros.pkg import A\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    graph = import_graph()
    assert graph["robofollow_ros.pkg.a"] == {"robofollow_ros.pkg.b": 1}
    assert graph["robofollow_ros.pkg.b"] == {"robofollow_ros.pkg": 1}
    assert strongly_connected(graph) == [["robofollow_ros.pkg", "robofollow_ros.pkg.a", "robofollow_ros.pkg.b"]]


def room(module: str) -> str:
    """The folder or top-level module of ``robofollow_ros`` that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def floor_of() -> dict[str, int]:
    return {name: level for level, names in enumerate(FLOORS) for name in names}


def test_every_room_has_a_floor():
    rooms = {room(m) for m in all_modules()} - {""}
    assert sorted(rooms - set(floor_of())) == [], "place the new folder or module on a floor in FLOORS and the README"
    assert sorted(set(floor_of()) - rooms) == [], "FLOORS names a folder that is gone"


def test_imports_point_downwards():
    floors = floor_of()
    upward = []
    for module, edges in import_graph().items():
        here = room(module)
        for target, line in edges.items():
            there = room(target)
            if here and there and here != there and floors[there] >= floors[here]:
                upward.append(f"{module} (line {line}, floor {floors[here]}) imports {target} (floor {floors[there]})")
    assert not upward, "imports that do not point downwards:\n" + "\n".join(upward)


def test_a_wire_protocol_imports_no_other_protocol():
    wire = f"{PACKAGE}.policy.wire."
    protocols = {p.parent.name for p in (ROOT / PACKAGE / "policy" / "wire").glob("*/__init__.py")}
    assert {"robofollow", "openpi"} <= protocols
    crossing = [f"{module} -> {target}" for module, edges in import_graph().items() for target in edges
                for proto in protocols if module.startswith(wire + proto + ".") or module == wire + proto
                if target.startswith(wire) and target.removeprefix(wire).split(".")[0] in protocols - {proto}]
    assert crossing == []


def test_naming_policies_costs_neither_torch_nor_sapien():
    script = ("import sys\n"
              "import robofollow_ros.policy, robofollow_ros.policy.spec, robofollow_ros.policy.learned\n"
              "from robofollow_ros.policy.spec import builtin_names\n"
              "assert {'hold', 'oracle', 'blind', 'memorizer'} <= set(builtin_names())\n"
              "print(sorted(m for m in ('torch', 'sapien') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
