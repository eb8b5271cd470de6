"""Typed, described, validated ROS parameters for the nodes.

Each node declares its parameters through :class:`ParameterSet` with a type, a description and an
optional validator; a bad value (at start-up or through ``ros2 param set``) is rejected with a reason
naming the parameter and the value, instead of failing later inside the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

Validator = Callable[[Any], str | None]  # returns a reason when the value is bad


class ParameterError(ValueError):
    """A parameter's value was rejected at start-up."""


def positive(value: Any) -> str | None:
    return None if isinstance(value, int | float) and value > 0 else "must be > 0"


def one_of(*choices: str) -> Validator:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}"


def length(n: int) -> Validator:
    return lambda value: None if len(value) == n else f"must have {n} values"


class ParameterSet:
    """Declare-and-validate helper bound to one node."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._validators: dict[str, Validator] = {}
        node.add_on_set_parameters_callback(self._on_set)

    def declare(
        self, name: str, default: Any, description: str, validator: Validator | None = None, read_only: bool = False
    ) -> Any:
        descriptor = ParameterDescriptor(description=description, read_only=read_only)
        if validator is not None:
            self._validators[name] = validator
        value = self._node.declare_parameter(name, default, descriptor).value
        reason = validator(value) if validator is not None else None
        if reason is not None:
            raise ParameterError(f"parameter {name!r} = {value!r} rejected: {reason}")
        return value

    def get(self, name: str) -> Any:
        return self._node.get_parameter(name).value

    def _on_set(self, params: list[Parameter]) -> SetParametersResult:
        for p in params:
            validator = self._validators.get(p.name)
            reason = validator(p.value) if validator is not None else None
            if reason is not None:
                return SetParametersResult(successful=False, reason=f"{p.name} = {p.value!r}: {reason}")
        return SetParametersResult(successful=True)
