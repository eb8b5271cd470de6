"""The package's folders import downward only (issue 22, "the house").

Every import counts: at module level, inside functions and under ``TYPE_CHECKING`` alike, because a
lazy import is still a dependency and a circle of lazy imports is still a circle. Checked on the
source text, so these tests import nothing heavy.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "robofollow_ros"
#: What ``policy/`` may import besides itself: the contract, bounded JSON, the task registry and the
#: rig's description (``sim/`` today; ``robot/`` is where issue 22 moves the kinematics).
POLICY_MAY_IMPORT = ("contract", "jsonlimits", "benchmark", "sim", "robot")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _owner(name: str) -> str | None:
    """The package module that ``name`` (a module, or a module plus an attribute) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """Every package module ``module`` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_owner(alias.name) or "" for alias in node.names if alias.name.startswith("robofollow_ros"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("robofollow_ros"):
            for alias in node.names:  # ``from package import submodule`` depends on the submodule
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else _owner(node.module or "") or "")
    return found - {"", module}


GRAPH = {module: _imports(module) for module in MODULES}


def _circles(prefix: str) -> list[list[str]]:
    """Strongly connected groups of more than one module among the modules under ``prefix``."""
    nodes = [m for m in GRAPH if m == prefix or m.startswith(prefix + ".")]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v] & set(nodes):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = [stack.pop()]
            while group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for v in nodes:
        if v not in index:
            visit(v)
    return circles


@pytest.mark.parametrize("folder", ["robofollow_ros.policy", "robofollow_ros.decisions"])
def test_no_import_circles(folder: str) -> None:
    assert _circles(folder) == []


def test_policy_imports_nothing_above_it() -> None:
    allowed = ("robofollow_ros.policy", *(f"robofollow_ros.{name}" for name in POLICY_MAY_IMPORT))
    upward = sorted(f"{module} -> {target}" for module, targets in GRAPH.items()
                    if module.startswith("robofollow_ros.policy") for target in targets
                    if not any(target == a or target.startswith(a + ".") for a in allowed))
    assert upward == []


def test_a_wire_protocol_imports_no_other_protocol() -> None:
    wire = "robofollow_ros.policy.wire."
    protocols = {folder.name for folder in (PACKAGE / "policy" / "wire").iterdir() if (folder / "__init__.py").exists()}
    assert {"robofollow", "openpi"} <= protocols
    crossing = sorted(f"{module} -> {target}" for module, targets in GRAPH.items()
                      for proto in protocols if module.startswith(f"{wire}{proto}")
                      for target in targets
                      if target.startswith(wire) and target.removeprefix(wire).split(".")[0] in protocols - {proto})
    assert crossing == []


def test_naming_policies_costs_neither_torch_nor_sapien() -> None:
    script = ("import sys\n"
              "import robofollow_ros.policy, robofollow_ros.policy.spec, robofollow_ros.policy.learned\n"
              "from robofollow_ros.policy.spec import builtin_names\n"
              "assert {'hold', 'oracle', 'blind', 'memorizer'} <= set(builtin_names())\n"
              "print(sorted(m for m in ('torch', 'sapien') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
