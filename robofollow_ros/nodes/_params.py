"""Typed, described, validated ROS parameters for the nodes.

Each node declares its parameters through :class:`ParameterSet` with a type, a description and an
optional validator; a bad value (at start-up or through ``ros2 param set``) is rejected with a reason
naming the parameter and the value, instead of failing later inside the node.

What ``ros2 param describe`` shows is what the code enforces: a numeric validator is a :class:`Bounds`,
which the descriptor carries as a ``FloatingPointRange`` / ``IntegerRange`` (and every validator's rule
as ``additional_constraints``). A parameter the node reads only at start-up is read-only, so a
``ros2 param set`` on it is refused rather than accepted and silently ignored; the few the node reads
again while it runs are declared with ``read_only=False``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

Validator = Callable[[Any], str | None]  # returns a reason when the value is bad

#: The ends of an unbounded side of a range in a descriptor (a message field cannot say "none").
_FLOAT_MAX = sys.float_info.max
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


class ParameterError(ValueError):
    """A parameter's value was rejected at start-up."""


@dataclass(frozen=True)
class Bounds:
    """A finite number in ``[low, high]`` (``low_open``: above ``low``); None leaves a side open.

    Called, it is a validator; :meth:`ranges` gives the descriptor's range for a parameter of the
    default's type. A descriptor's range is closed, so ``> 0`` shows as ``0.0 .. max`` (``0`` for
    an integer becomes ``1``) and the exact rule is in ``additional_constraints``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    rule: str = ""
    integer: bool = False

    def __call__(self, value: Any) -> str | None:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and \
            (not self.integer or isinstance(value, int)) and \
            (self.low is None or (value > self.low if self.low_open else value >= self.low)) and \
            (self.high is None or value <= self.high)
        return None if ok else self.describe()

    def describe(self) -> str:
        if self.rule:
            return self.rule
        low = None if self.low is None else f"{'>' if self.low_open else '>='} {self.low}"
        high = None if self.high is None else f"<= {self.high}"
        return "must be a finite number " + " and ".join(s for s in (low, high) if s)

    def ranges(self, default: Any) -> dict[str, Any]:
        """``floating_point_range`` or ``integer_range`` of a descriptor for a parameter like ``default``."""
        if isinstance(default, bool) or not isinstance(default, int | float):
            return {}
        if isinstance(default, int):
            low = _INT_MIN if self.low is None else math.floor(self.low) + 1 if self.low_open else math.ceil(self.low)
            high = _INT_MAX if self.high is None else math.floor(self.high)
            return {"integer_range": [IntegerRange(from_value=int(low), to_value=int(high), step=1)]}
        low_f = -_FLOAT_MAX if self.low is None else float(self.low)
        high_f = _FLOAT_MAX if self.high is None else float(self.high)
        return {"floating_point_range": [FloatingPointRange(from_value=low_f, to_value=high_f, step=0.0)]}


#: Any finite number above zero (rates, periods, sizes).
positive = Bounds(low=0, low_open=True, rule="must be > 0")
#: Any finite number from zero up.
non_negative = Bounds(low=0, rule="must be >= 0")


def one_of(*choices: str) -> Validator:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}"


def length(n: int) -> Validator:
    return lambda value: None if len(value) == n else f"must have {n} values"


def descriptor(name: str, default: Any, description: str, validator: Validator | None,
               read_only: bool) -> ParameterDescriptor:
    """The full descriptor: description, range, the validator's rule and read-only."""
    ranges = validator.ranges(default) if isinstance(validator, Bounds) else {}
    constraints = validator.describe() if isinstance(validator, Bounds) else ""
    return ParameterDescriptor(name=name, description=description, read_only=read_only,
                               additional_constraints=constraints, **ranges)


class ParameterSet:
    """Declare-and-validate helper bound to one node."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._validators: dict[str, Validator] = {}
        node.add_on_set_parameters_callback(self._on_set)

    def declare(
        self, name: str, default: Any, description: str, validator: Validator | None = None, read_only: bool = True
    ) -> Any:
        """Declare ``name`` and return its start-up value; a bad value raises :class:`ParameterError`.

        The value is checked by the validator before the range goes into the descriptor, so a value out
        of range gets the validator's one line (naming the rule), not rclpy's range message."""
        value = self._node.declare_parameter(name, default, ParameterDescriptor(description=description)).value
        if validator is not None:  # from now on (declaring, the start-up value is checked here, in our words)
            self._validators[name] = validator
        reason = validator(value) if validator is not None else None
        if reason is not None:
            raise ParameterError(f"parameter {name!r} = {value!r} rejected: {reason}")
        full = descriptor(name, default, description, validator, read_only)
        full.type = self._node.describe_parameter(name).type  # as declared (from the default)
        self._node.set_descriptor(name, full)
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
