"""``owda eval --model module:function``: a user's decider, loaded and held to the built-ins' rules.

Before this, evaluating one's own decider meant writing an OpenAI-compatible HTTP server around it.
Now a factory is imported as ``robofollow eval``'s policies are (``policy.spec.import_user_module``:
the directory the command runs in first, then ``sys.path``), called with ``--model-kwargs``, and its
product wrapped in :class:`FactoryDecider`, which

* hands ``decide`` its own deep copy of each anchor, so nothing it does to one reaches the scorer;
* bounds each call by ``--timeout``, like the chat endpoint's request: the call runs on one worker
  thread of its own (every call on the same thread), and a call past the bound stops the run;
* checks each answer (``interface.UserDecider``): ids go through the same reader as a chat model's
  reply; a wrong *type* is not an answer and stops the run with one line naming the model.

Every problem found while loading (no module, no such function, bad kwargs, a factory that raises or
returns something without ``decide``) is an ``OwdaError`` naming ``--model`` and the SPEC: the CLI
prints it as one line and exits 2 before the output directory is created.
"""

from __future__ import annotations

import copy
import inspect
import json
import queue
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.errors import ModelError, OwdaError
from robofollow_ros.decisions.interface import STATUSES, Answer, UserDecider
from robofollow_ros.decisions.prompt import read_ids, read_reply

#: ``module:function`` (the same form ``robofollow eval --policy`` takes).
FACTORY_SPEC = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_]\w*)$")


def is_factory_spec(spec: str) -> bool:
    return FACTORY_SPEC.match(spec) is not None


def load_factory_decider(spec: str, kwargs: Mapping[str, Any] | None, timeout_s: float,
                         search_dir: str | None = None) -> FactoryDecider:
    """Import ``module``, call ``function(**kwargs)`` and check that the result can ``decide``."""
    from robofollow_ros.policy.spec import PolicySpecError, import_user_module

    match = FACTORY_SPEC.match(spec)
    if match is None:
        raise OwdaError(f"--model {spec!r}: not module:function")
    kwargs = dict(kwargs or {})
    try:
        module = import_user_module(spec, match["module"], search_dir, what="--model")
    except PolicySpecError as exc:
        raise OwdaError(str(exc)) from None
    except Exception as exc:  # the module's own code failed while it was imported
        raise OwdaError(f"--model {spec!r}: importing module {match['module']!r} failed: "
                        f"{type(exc).__name__}: {exc}") from None
    factory = getattr(module, match["attr"], None)
    if not callable(factory):
        raise OwdaError(f"--model {spec!r}: module {match['module']!r} has no callable {match['attr']!r}")
    _check_kwargs(spec, factory, kwargs)
    try:
        made = factory(**kwargs)
    except Exception as exc:  # the user's code: its failure is one line, not a traceback
        raise OwdaError(f"--model {spec!r}: the factory raised {type(exc).__name__}: {exc}") from None
    if not callable(getattr(made, "decide", None)):
        raise OwdaError(f"--model {spec!r}: the factory returned {type(made).__name__}, which has no "
                        "decide(anchor, instruction) method")
    return FactoryDecider(spec, made, kwargs, timeout_s)


def _check_kwargs(spec: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Refuse kwargs the factory cannot take before calling it (a TypeError from inside it is its own)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or extension without one: the call will tell
        return
    try:
        signature.bind(**kwargs)
    except TypeError as exc:
        raise OwdaError(f"--model {spec!r}: bad --model-kwargs {sorted(kwargs)} ({exc})") from None


class FactoryDecider:
    """A user's decider behind the checks and the time bound (see the module doc)."""

    def __init__(self, spec: str, inner: UserDecider, kwargs: Mapping[str, Any], timeout_s: float) -> None:
        self.name = spec
        self.inner = inner
        self.timeout_s = timeout_s
        #: what ``run.json`` records of this model besides its name (a resumed run must match it)
        self.record: dict[str, Any] = {"factory": spec, "kwargs": dict(kwargs)}
        self._copies: dict[Anchor, Anchor] = {}  # the scorer's anchor (hashed by identity) -> the decider's copy
        self._worker = _Worker(f"owda-decider {spec}")

    def decide(self, anchor: Anchor, instruction: str) -> Answer:
        own = self._copies.get(anchor)
        if own is None:
            own = self._copies[anchor] = copy.deepcopy(anchor)
        value = self._worker.call(lambda: self.inner.decide(own, instruction), self.timeout_s,
                                  f"model {self.name!r}")
        return self._checked(anchor, value)

    def _checked(self, anchor: Anchor, value: object) -> Answer:
        where = f"model {self.name!r}"
        if isinstance(value, str):
            reading = read_reply(anchor, value)
            return Answer(value, reading.decision, reading.status)
        if isinstance(value, Answer):
            if not isinstance(value.raw, str):
                raise ModelError(f"{where}: decide() returned an Answer whose raw is {type(value.raw).__name__}, "
                                 "not a string")
            if value.decision is None:
                if value.status not in STATUSES[1:]:
                    raise ModelError(f"{where}: decide() returned an Answer without a decision and status "
                                     f"{value.status!r}; it must say why: one of {list(STATUSES[1:])}")
                return Answer(value.raw, None, value.status)
            ids = _ids(value.decision)
            if ids is None:
                raise ModelError(f"{where}: decide() returned an Answer whose decision is not a tuple of ids: "
                                 f"{value.decision!r:.200}")
            reading = read_ids(anchor, ids)
            return Answer(value.raw, reading.decision, reading.status)
        ids = _ids(value)
        if ids is None:
            raise ModelError(f"{where}: decide() returned {_show(value)}; expected a list of candidate ids, a "
                             'reply string like {"decision": [ids]}, or an Answer')
        reading = read_ids(anchor, ids)
        return Answer(json.dumps({"decision": ids}), reading.decision, reading.status)


def _ids(value: object) -> list[str] | None:
    """``value`` as a list of ids when it is a list or tuple of strings, else None."""
    if isinstance(value, (list, tuple)) and all(isinstance(i, str) for i in value):
        return list(value)
    return None


def _show(value: object) -> str:
    if isinstance(value, (list, tuple)):
        kinds = sorted({type(i).__name__ for i in value if not isinstance(i, str)})
        return f"a {type(value).__name__} holding {', '.join(kinds)} ({value!r:.120})"
    return f"{type(value).__name__} ({value!r:.120})"


class _Worker:
    """One daemon thread that runs every call, so that a call can be given up on after its bound.

    A call past its bound keeps running (Python cannot stop a thread); the worker is then spent and every
    later call is refused at once. Being a daemon, it does not keep the process alive once the run stops.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs: queue.Queue[tuple[Callable[[], object], queue.Queue[tuple[bool, object]]]] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.stuck = ""

    def call(self, fn: Callable[[], object], timeout_s: float, where: str) -> object:
        if self.stuck:
            raise ModelError(f"{where}: an earlier decide() call ({self.stuck}) is still running")
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self.thread.start()
        box: queue.Queue[tuple[bool, object]] = queue.Queue(maxsize=1)
        self.jobs.put((fn, box))
        try:
            ok, value = box.get(timeout=timeout_s)
        except queue.Empty:
            self.stuck = f"past --timeout {timeout_s:g} s"
            raise ModelError(f"{where}: decide() gave no answer within --timeout {timeout_s:g} s") from None
        if not ok:
            exc = value
            raise ModelError(f"{where}: decide() raised {type(exc).__name__}: {exc}")
        return value

    def _run(self) -> None:
        while True:
            fn, box = self.jobs.get()
            try:
                box.put((True, fn()))
            except BaseException as exc:  # whatever the user's code raises goes back to the caller
                box.put((False, exc))
