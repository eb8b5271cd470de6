"""Every node's parameters — name, type, default, range check — read from the node's own declarations.

A profile (or a launch argument) must be checked before any node starts: an unknown name, a
wrong type or a value out of range is one line naming the file, the node and the parameter, not a
traceback from inside a node, nor a silently ignored override (ROS drops undeclared overrides).
The nodes declare their parameters through ``ParameterSet.declare(name, default, description,
validator)`` with literal names; this module reads those calls from each node module's source and
evaluates the default and the validator in the module's namespace, so there is no second list of
parameters to keep in step (``test_parameter_schema`` checks it against the constructed nodes).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from robofollow_ros.nodes.catalog import NODE_ENTRY_POINTS

#: Declared by rclpy itself on every node.
IMPLICIT = {"use_sim_time": False, "start_type_description_service": True}


@dataclass(frozen=True)
class ParameterSpec:
    name: str
    default: Any
    validator: Callable[[Any], str | None] | None = None
    read_only: bool = False  # ParameterSet.declare's default is True; rclpy's own are not

    @property
    def type_name(self) -> str:
        return type_name(self.default)

    def check(self, value: Any) -> str | None:
        """Why ``value`` cannot be this parameter's value (None when it can), as ROS would judge it."""
        expected, got = self.type_name, type_name(value)
        if expected != got:
            hint = " (write it with a decimal point, e.g. 10.0)" if (expected, got) == ("float", "int") else ""
            return f"{value!r} is {_article(got)}, expected {_article(expected)}{hint}"
        if self.validator is not None:
            try:
                reason = self.validator(value)
            except (TypeError, ValueError) as exc:
                reason = str(exc)
            if reason is not None:
                return f"{value!r} {reason}"
        return None


def type_name(value: Any) -> str:
    """ROS 2 parameter type of a Python value (bool before int: ROS keeps them apart)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple) and value:
        kinds = {type_name(v) for v in value}
        return f"{kinds.pop()} list" if len(kinds) == 1 else "mixed list"
    return type(value).__name__


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


@functools.cache
def node_parameters(executable: str) -> dict[str, ParameterSpec]:
    """The parameters ``executable`` declares, plus rclpy's own (``use_sim_time``)."""
    module = importlib.import_module(NODE_ENTRY_POINTS[executable].split(":")[0])
    source = inspect.getsource(module)
    namespace = vars(module)
    specs: dict[str, ParameterSpec] = {n: ParameterSpec(n, v) for n, v in IMPLICIT.items()}
    for call in ast.walk(ast.parse(source)):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "declare"):
            continue
        args = {k.arg: k.value for k in call.keywords if k.arg}
        positional = dict(zip(("name", "default", "description", "validator", "read_only"), call.args, strict=False))
        args = {**positional, **args}
        name = args.get("name")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)) or "default" not in args:
            raise ValueError(f"{module.__file__}:{call.lineno}: a parameter declaration without a literal name "
                             "and a default")

        def value(node: ast.expr | None, line: int = call.lineno) -> Any:
            if node is None:
                return None
            try:
                return eval(compile(ast.Expression(node), module.__file__ or "<node>", "eval"), namespace)
            except Exception as exc:
                raise ValueError(f"{module.__file__}:{line}: cannot read a parameter declaration ({exc})") from None

        specs[name.value] = ParameterSpec(name.value, value(args["default"]), value(args.get("validator")),
                                          "read_only" not in args or bool(value(args["read_only"])))
    return specs
