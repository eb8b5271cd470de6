"""The rclpy names the nodes use that differ between ROS 2 releases, in one place.

Tested here on Jazzy (rclpy 7.1, the default venv) and Kilted (9.1, ``make test-matrix``); Humble (rclpy 3.3)
is not on PyPI, so its branches below are written against rclpy's ``humble`` source and checked only by
``test/test_rclpy_compat.py`` (docs/ros.md, "ROS 2 releases", says exactly what is and is not checked):

- ``rclpy.event_handler`` (Iron+) was ``rclpy.qos_event`` in Humble.
- A publisher's *matched* event (``PublisherEventCallbacks(matched=...)``, ``QoSPublisherMatchedInfo``) is Iron+:
  :func:`publisher_matched_callbacks` gives ``None`` on Humble, and a reader that joins late waits for the next
  state instead of getting the current one again.
- A subscription callback that takes ``(msg, info)`` gets the middleware's ``MessageInfo`` from Iron on;
  Humble's executor calls it with the message alone: :func:`with_message_info` then passes an empty info
  (no reception time, which the arm bridge already handles).
- ``rclpy.init`` returns a context manager from rclpy 8 on (Kilted's 9.1; Jazzy's 7.1 returns ``None``):
  :func:`ros_init` is one on every release.
- ``rclpy.subscription.MessageInfo`` is a TypedDict from rclpy 8 on; :class:`MessageInfo` is its shape.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

import rclpy
from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription

try:  # Iron and later
    from rclpy.event_handler import (
        PublisherEventCallbacks,
        QoSLivelinessChangedInfo,
        SubscriptionEventCallbacks,
    )
except ImportError:  # Humble
    from rclpy.qos_event import (  # type: ignore[no-redef]
        PublisherEventCallbacks,
        QoSLivelinessChangedInfo,
        SubscriptionEventCallbacks,
    )

__all__ = ["HAS_MATCHED_EVENTS", "HAS_MESSAGE_INFO", "InvalidHandle", "MessageInfo", "PublisherEventCallbacks",
           "QoSLivelinessChangedInfo", "QoSPublisherMatchedInfo", "SubscriptionEventCallbacks",
           "publisher_matched_callbacks", "ros_init", "with_message_info"]

#: Publishers report readers matching and leaving (rclpy 4, Iron, and later).
HAS_MATCHED_EVENTS = "matched" in inspect.signature(PublisherEventCallbacks.__init__).parameters
#: The executor passes a ``MessageInfo`` to a callback that takes two arguments (Iron and later).
HAS_MESSAGE_INFO = hasattr(Subscription, "CallbackType")

#: What a matched callback receives: ``rmw_matched_status_t`` (``current_count_change`` and the counts).
QoSPublisherMatchedInfo = Any


class MessageInfo(TypedDict, total=False):
    """The middleware's information on one received message (``rclpy.subscription.MessageInfo``, rclpy 8+)."""

    source_timestamp: int
    received_timestamp: int
    publication_sequence_number: int | None
    reception_sequence_number: int | None


def publisher_matched_callbacks(on_matched: Callable[[Any], None]) -> PublisherEventCallbacks | None:
    """Event callbacks that call ``on_matched`` when a reader matches or leaves; ``None`` where rclpy has no
    such event (Humble), which ``create_publisher(event_callbacks=None)`` takes as no callbacks."""
    return PublisherEventCallbacks(matched=on_matched) if HAS_MATCHED_EVENTS else None


def with_message_info(callback: Callable[[Any, MessageInfo], None],
                      supported: bool = HAS_MESSAGE_INFO) -> Callable[..., None]:
    """``callback(msg, info)`` as a subscription callback: itself where the executor passes the info, else a
    one-argument callback that passes an empty info."""
    if supported:
        return callback
    return lambda msg: callback(msg, MessageInfo())


@contextmanager
def ros_init(args: list[str] | None = None, context: Context | None = None,
             signal_handler_options: SignalHandlerOptions | None = None) -> Iterator[None]:
    """``rclpy.init`` for a ``with`` block on every release; the block's end shuts the context down (as
    rclpy 8's ``with rclpy.init(...)`` does), unless something shut it down already."""
    rclpy.init(args=args, context=context, signal_handler_options=signal_handler_options)
    try:
        yield
    finally:
        rclpy.try_shutdown(context=context)
