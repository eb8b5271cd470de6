"""Policy SPEC strings: how a user names a policy on the command line.

``hold`` and the other built-ins (``oracle``, ``blind``, ``memorizer``, and names users add with
:func:`register_builtin`), ``module:function`` (a factory called with the JSON kwargs),
``tcp://HOST:PORT`` (a RoboFollow policy server), ``openpi://HOST:PORT`` (an openpi websocket
server), ``learned:CKPT`` (a ``robofollow train`` checkpoint) and ``latency:MS[~JITTER_MS[n]][@SEED]:SPEC``
(any of these, slowed down by a fixed or sampled latency before each predict: ``policy.latency``).

This module owns the table of built-in names. Each entry is a small factory that imports its
policy's module only when called, so naming a built-in costs neither SAPIEN nor torch until the
policy is built, and no policy module needs to import this one to register itself.

It also decides, once per loaded policy, whether the policy is handed privileged state
(``load_policy(..., privileged=)``, the run's ``--privileged``): a policy of this package that declares
``needs_privileged`` gets it in process; any other only with the flag; a ``tcp://`` client forwards it
only with the flag; ``openpi://`` cannot carry it and refuses the flag (:func:`check_privileged`).

``module:function`` finds modules as ``python -m`` would: in the directory the command was started
from (the ``robofollow`` console script leaves it off ``sys.path``), then on ``sys.path``. A module
found nowhere is named with the directory looked in and ``PYTHONPATH``, the way to point at another.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from robofollow_ros.policy.interface import OWN_POLICIES, Policy, PolicyWrapper, ValidatedPolicy
from robofollow_ros.policy.latency import LatencyPolicy, LatencySpec, parse_latency_spec
from robofollow_ros.policy.remote import RemoteSpec, RemoteSpecError, parse_remote

PolicyFactory = Callable[..., Policy]

_FACTORY = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_]\w*)$")


class PolicySpecError(ValueError):
    """A policy SPEC or its kwargs cannot be turned into a policy; the message names the SPEC."""


# ------------------------------------------------------------------------------- built-ins
def _hold(**kwargs: Any) -> Policy:
    from robofollow_ros.policy.baselines.hold import HoldPolicy

    return HoldPolicy(**kwargs)


def _oracle(**kwargs: Any) -> Policy:
    from robofollow_ros.policy.expert.oracle import OraclePolicy

    return OraclePolicy(**kwargs)


def _blind(**kwargs: Any) -> Policy:
    from robofollow_ros.policy.baselines.mirage import BlindPolicy

    return BlindPolicy(**kwargs)


def _memorizer(**kwargs: Any) -> Policy:
    from robofollow_ros.policy.baselines.mirage import MemorizerPolicy

    return MemorizerPolicy(**kwargs)


#: Built-ins whose policy declares ``needs_privileged`` (they read the true poses and the task id in process). Only
#: for run.json files written before ``privileged_source`` (which recorded the flag alone): a run records what its
#: policy received (``TrialWorker.info``, :func:`spec_declares_privileged`). A test keeps it equal to the classes.
PRIVILEGED_BUILTINS = frozenset({"oracle", "blind"})

#: The class each of the package's built-ins builds (``module:Class``), read for its declaration without building it.
_BUILTIN_CLASSES = {"hold": "robofollow_ros.policy.baselines.hold:HoldPolicy",
                    "oracle": "robofollow_ros.policy.expert.oracle:OraclePolicy",
                    "blind": "robofollow_ros.policy.baselines.mirage:BlindPolicy",
                    "memorizer": "robofollow_ros.policy.baselines.mirage:MemorizerPolicy"}


def spec_declares_privileged(spec: str) -> bool:
    """Whether the policy ``spec`` names declares ``needs_privileged`` (so it is handed privileged state in process
    without ``--privileged``), from its class, without building it: the package's built-ins (through ``latency:``);
    False for any other SPEC (a remote policy never receives it without the flag; a factory's policy is known only
    once built: ``interface.receives_privileged`` of the built policy is the answer there)."""
    try:
        delayed = parse_latency_spec(spec.strip())
    except ValueError:
        return False
    if delayed is not None:
        return spec_declares_privileged(delayed.inner)
    target = _BUILTIN_CLASSES.get(spec.strip())
    if target is None or _BUILTINS.get(spec.strip()) is not _DEFAULT_BUILTINS.get(spec.strip()):
        return False  # not a built-in, or a name a user registered over it
    module, _, name = target.partition(":")
    return getattr(getattr(importlib.import_module(module), name), "needs_privileged", False) is True

#: SPEC name → factory. The package's own entries import nothing until called (see the module doc).
_BUILTINS: dict[str, PolicyFactory] = {"hold": _hold, "oracle": _oracle, "blind": _blind, "memorizer": _memorizer}
_DEFAULT_BUILTINS = dict(_BUILTINS)


def register_builtin(name: str, factory: PolicyFactory) -> None:
    """Make ``name`` a valid SPEC. Re-registering a name replaces its factory."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise ValueError(f"name: {name!r} must be lower-case letters, digits, '-' or '_'")
    _BUILTINS[name] = factory


def builtin_names() -> tuple[str, ...]:
    return tuple(sorted(_BUILTINS))


# ------------------------------------------------------------------------------- loading
def load_policy(spec: str, kwargs: dict[str, Any] | None = None, *, validate: bool = True,
                privileged: bool = False, search_dir: str | None = None) -> Policy:
    """Build the policy named by ``spec``; wrapped in :class:`ValidatedPolicy` unless ``validate`` is False.

    Remote specs accept the client's keyword arguments as kwargs (e.g. ``{"timeout_s": 300}``).
    ``privileged`` (the run's ``--privileged``): the policy is handed ``obs["privileged"]`` whatever it is,
    and a ``tcp://`` client forwards it over the wire; without it only a policy of this package that
    declares ``needs_privileged`` receives it, in process. A policy elsewhere that declares it is refused
    without the flag (``PolicySpecError``), so that no run hands out privileged state unrecorded.
    ``search_dir``: where ``module:function`` looks first (default: the current directory), as
    ``python -m`` run there would; a worker passes the directory its command was started from.
    """
    kwargs = dict(kwargs or {})
    if not isinstance(spec, str) or not spec.strip():
        raise PolicySpecError(f"policy spec: {spec!r} is empty; expected one of {_forms()}")
    spec = spec.strip()
    check_privileged(spec, privileged)
    if FORWARD_PRIVILEGED in kwargs:
        raise PolicySpecError(f"policy spec {spec!r}: kwargs {FORWARD_PRIVILEGED!r} is not an option; "
                              "privileged state travels only with --privileged")
    policy = _build(spec, kwargs, privileged, search_dir)
    for method in ("reset", "set_instruction", "predict"):
        if not callable(getattr(policy, method, None)):
            raise PolicySpecError(f"policy spec {spec!r}: the factory returned {type(policy).__name__}, "
                                  f"which has no {method}() method")
    if isinstance(policy, ValidatedPolicy):  # a factory's own wrapper: this run decides what it receives
        policy = policy.inner
    _check_declaration(spec, policy, privileged)
    return ValidatedPolicy(policy, privileged=privileged) if validate else policy


def load_served_policy(spec: str, kwargs: dict[str, Any] | None = None) -> Policy:
    """What ``robofollow serve`` serves: a policy handed each request's observation as it arrives, the
    ``privileged`` object included when the client sent one (ours does only in a run started with
    ``--privileged``). So a policy's declaration is not refused here, and a ``tcp://`` upstream passes on
    what arrived; the evaluating run, not the server, decides what travels."""
    spec = spec.strip() if isinstance(spec, str) else spec
    return load_policy(spec, kwargs, privileged=isinstance(spec, str) and _can_carry_privileged(spec))


#: The ``tcp://`` client's keyword that ``load_policy`` sets from ``privileged`` (never from kwargs).
FORWARD_PRIVILEGED = "forward_privileged"


def check_privileged(spec: str, privileged: bool) -> None:
    """``PolicySpecError`` naming ``--privileged`` when ``spec`` cannot carry privileged state (every wire but
    RoboFollow's own: a peer's request holds the images, the state and the instruction only)."""
    if privileged and not _can_carry_privileged(spec):
        raise PolicySpecError(f"--privileged: {spec.strip()} cannot carry privileged state (its requests hold "
                              "images, state and instruction only); serve the policy with --protocol robofollow "
                              "and use tcp://, or drop --privileged")


def check_render(spec: str, render: bool) -> None:
    """``PolicySpecError`` naming ``--no-render`` when ``spec``'s wire carries camera images (openpi://,
    gr00t://, xpolicylab://): without rendering every trial would fail on its first request."""
    if render:
        return
    remote = _remote_of(spec)
    if remote is not None and remote.client.needs_images:
        raise PolicySpecError(f"--no-render: {remote.address} needs camera images ({remote.client.what}); "
                              "leave out --no-render")


def _remote_of(spec: str) -> RemoteSpec | None:
    """The remote SPEC behind ``spec`` (through ``latency:``), or None (in process, or unparsable: loading
    names what is wrong)."""
    try:
        delayed = parse_latency_spec(spec)
        if delayed is not None:
            return _remote_of(delayed.inner)
        return parse_remote(spec)
    except ValueError:  # RemoteSpecError is one
        return None


def _can_carry_privileged(spec: str) -> bool:
    try:
        delayed = parse_latency_spec(spec)
    except ValueError:
        return True  # loading names what is wrong with the SPEC
    if delayed is not None:
        return _can_carry_privileged(delayed.inner)
    try:
        remote = parse_remote(spec)
    except RemoteSpecError:
        return True  # not this check's business: loading names what is wrong with the SPEC
    return remote is None or remote.client.carries_privileged


def _check_declaration(spec: str, policy: Any, privileged: bool) -> None:
    while isinstance(policy, PolicyWrapper):  # a wrapper of this package declares what its inner policy does
        policy = policy.inner
    declared = getattr(policy, "needs_privileged", False) is True
    if declared and not privileged and not type(policy).__module__.startswith(OWN_POLICIES):
        raise PolicySpecError(f"policy spec {spec!r}: {type(policy).__name__} declares needs_privileged = True; "
                              "only this package's own policies (oracle, blind, drills) receive privileged state "
                              "without --privileged (a privileged run is recorded as such and is not comparable "
                              "with published results)")


def spec_forms() -> str:
    """Every SPEC form, for ``--help`` and error messages: the built-ins, checkpoints, factories, wires."""
    from robofollow_ros.policy.remote import forms

    return f"{', '.join(builtin_names())}, learned:CKPT, module:function, {forms()}, latency:MS[~JITTER_MS]:SPEC"


_forms = spec_forms


def _call(spec: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        return factory(**kwargs)
    except TypeError as exc:
        raise PolicySpecError(f"policy spec {spec!r}: bad kwargs {sorted(kwargs)} ({exc})") from exc
    except ValueError as exc:
        raise PolicySpecError(f"policy spec {spec!r}: {exc}") from exc


def _latency_of(spec: str) -> LatencySpec | None:
    try:
        return parse_latency_spec(spec)
    except ValueError as exc:
        raise PolicySpecError(str(exc)) from None


def _build(spec: str, kwargs: dict[str, Any], privileged: bool, search_dir: str | None = None) -> Any:
    delayed = _latency_of(spec)
    if delayed is not None:  # the inner SPEC is built as it would be alone, then slowed down
        inner = _build(delayed.inner, kwargs, privileged, search_dir)
        if not callable(getattr(inner, "predict", None)):
            raise PolicySpecError(f"policy spec {delayed.inner!r}: the factory returned {type(inner).__name__}, "
                                  "which has no predict() method")
        if isinstance(inner, ValidatedPolicy):
            inner = inner.inner
        _check_declaration(delayed.inner, inner, privileged)
        return LatencyPolicy(inner, **delayed.kwargs())
    if spec in _BUILTINS:
        return _call(spec, _BUILTINS[spec], kwargs)
    if spec.startswith("learned:"):  # a checkpoint of `robofollow train` (learned/policy.py)
        from robofollow_ros.policy.learned.policy import learned_policy

        return _call(spec, learned_policy, {"checkpoint": spec.removeprefix("learned:"), **kwargs})
    try:
        remote = parse_remote(spec)
    except RemoteSpecError as exc:
        raise PolicySpecError(str(exc)) from None
    if remote is not None:
        module, _, name = remote.client.factory.partition(":")
        client = getattr(importlib.import_module(module), name)
        try:
            client_kwargs = remote.client_kwargs(kwargs)
        except RemoteSpecError as exc:
            raise PolicySpecError(str(exc)) from None
        if remote.client.carries_privileged:
            client_kwargs[FORWARD_PRIVILEGED] = privileged
        return _call(spec, client, client_kwargs)
    factory = _FACTORY.match(spec)
    if not factory:
        raise PolicySpecError(f"policy spec {spec!r}: not a built-in and not module:function; expected {_forms()}")
    module = import_user_module(spec, factory["module"], search_dir)
    target = getattr(module, factory["attr"], None)
    if not callable(target):
        raise PolicySpecError(f"policy spec {spec!r}: module {factory['module']!r} has no callable "
                              f"{factory['attr']!r}")
    return _call(spec, target, kwargs)


def import_user_module(spec: str, name: str, search_dir: str | None, what: str = "policy spec") -> Any:
    """Import ``name`` as ``python -m`` would from ``search_dir`` (default: the current directory).

    The directory goes first on ``sys.path`` and stays there (a module may import its neighbours
    later); it is added once. A module found nowhere names the directory and ``PYTHONPATH``; a module
    that is found but fails while importing (one of *its* imports is missing) says so instead.
    ``what`` names the option in each message (``owda eval``'s deciders pass ``--model``)."""
    where = f"{what} {spec!r}"
    folder = os.path.abspath(search_dir or os.getcwd())
    if folder not in (os.path.abspath(p or os.curdir) for p in sys.path):
        sys.path.insert(0, folder)
        importlib.invalidate_caches()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise PolicySpecError(
                f"{where}: no module named {exc.name!r} in {folder} (the current directory) or on "
                f"sys.path; run from the folder that holds it, or add that folder to PYTHONPATH "
                f"(PYTHONPATH=/path/to/folder robofollow ...)") from exc
        raise PolicySpecError(f"{where}: importing module {name!r} failed: {exc} "
                              "(a module it imports is missing)") from exc
    except (ImportError, SyntaxError) as exc:
        raise PolicySpecError(f"{where}: importing module {name!r} failed: "
                              f"{type(exc).__name__}: {exc}") from exc


#: What ``load_policy`` calls for the SPECs that are not ``module:function`` themselves (run.json's
#: ``arguments.policy_factory`` names it, as the official evaluator's ``--policy-factory`` would).
_LEARNED_FACTORY = "robofollow_ros.policy.learned.policy:learned_policy"
_LATENCY_FACTORY = "robofollow_ros.policy.spec:latency_policy"


def latency_policy(inner: str, latency_ms: float, jitter_ms: float = 0.0, distribution: str = "uniform",
                   seed: int = 0, inner_kwargs: dict[str, Any] | None = None) -> Policy:
    """The factory ``factory_of`` names for a ``latency:`` SPEC: ``inner`` (a SPEC, with ``inner_kwargs``)
    behind a :class:`~robofollow_ros.policy.latency.LatencyPolicy`."""
    return LatencyPolicy(load_policy(inner, inner_kwargs, validate=False), latency_ms, jitter_ms, distribution, seed)


def factory_of(spec: str, kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """What ``load_policy(spec, kwargs)`` builds, without importing anything: ``{"factory", "kwargs", "remote"}``.

    ``factory``: the ``module:function`` it calls with ``kwargs`` (a built-in is named by its own factory,
    e.g. ``robofollow_ros.policy.spec:_hold``); ``remote``: ``(host, port)`` of a ``tcp://`` server (the
    official evaluator's ``--remote``), whose client is not a factory there. A SPEC that names nothing
    loadable gives ``factory`` None."""
    kwargs = dict(kwargs or {})
    spec = spec.strip() if isinstance(spec, str) else ""
    out: dict[str, Any] = {"factory": None, "kwargs": kwargs, "remote": None}
    try:
        remote = parse_remote(spec)
    except RemoteSpecError:
        remote = None
    try:
        delayed = parse_latency_spec(spec)
    except ValueError:
        delayed = None
    if delayed is not None:
        out.update(factory=_LATENCY_FACTORY, kwargs={"inner": delayed.inner, **delayed.kwargs(),
                                                     "inner_kwargs": kwargs})
    elif spec in _BUILTINS:
        factory = _BUILTINS[spec]
        name = f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', '?')}"
        out["factory"] = name if "<" not in name else None
    elif spec.startswith("learned:"):
        out.update(factory=_LEARNED_FACTORY, kwargs={"checkpoint": spec.removeprefix("learned:"), **kwargs})
    elif remote is not None and remote.scheme == "tcp":
        out["remote"] = (remote.host, remote.port)
    elif remote is not None:
        with contextlib.suppress(RemoteSpecError):
            out.update(factory=remote.client.factory, kwargs=remote.client_kwargs(kwargs))
    elif _FACTORY.match(spec):
        out["factory"] = spec
    return out
