"""The first header of a serialized (CDR) ROS 2 message, read without deserializing the message.

The recorder passes state messages on as CDR bytes and only needs each one's stamp (and, for TF,
which frames it moves) to know when a trial's last states are in; rclpy's deserializer takes
about 0.35 ms for a TF message of 20 links, a peek a few microseconds. Layout (XCDR1, as rmw
writes it): a 4-byte encapsulation header (byte 1: 1 = little endian), then the message with each
primitive aligned to its size from the end of that header. ``std_msgs/Header`` is
``int32 sec, uint32 nanosec, string frame_id``; a string is a uint32 length (with the NUL) and
its bytes.
"""

from __future__ import annotations

import struct

_ENCAPSULATION = 4


class _Reader:
    def __init__(self, data: bytes) -> None:
        if len(data) < _ENCAPSULATION or data[1] not in (0, 1):
            raise ValueError("not a CDR message (encapsulation header)")
        self.data, self.order, self.offset = data, "<" if data[1] == 1 else ">", _ENCAPSULATION

    def _align(self, size: int) -> None:
        self.offset += -(self.offset - _ENCAPSULATION) % size

    def uint32(self) -> int:
        self._align(4)
        (value,) = struct.unpack_from(self.order + "I", self.data, self.offset)
        self.offset += 4
        return int(value)

    def stamp(self) -> int:
        self._align(4)
        sec, nanosec = struct.unpack_from(self.order + "iI", self.data, self.offset)
        self.offset += 8
        return int(sec) * 1_000_000_000 + int(nanosec)

    def string(self) -> str:
        length = self.uint32()
        if length < 1 or self.offset + length > len(self.data):
            raise ValueError("CDR string out of bounds")
        text = self.data[self.offset:self.offset + length - 1].decode("utf-8")
        self.offset += length
        return text


def header_stamp(data: bytes) -> int:
    """The stamp (ns) of a message that starts with a ``std_msgs/Header`` (JointState, Image, ...)."""
    return _Reader(data).stamp()


def first_transform(data: bytes) -> tuple[int, str, str] | None:
    """(stamp ns, parent frame, child frame) of a ``tf2_msgs/TFMessage``'s first transform; None when empty."""
    reader = _Reader(data)
    if reader.uint32() == 0:
        return None
    stamp = reader.stamp()
    parent = reader.string()
    return stamp, parent, reader.string()


def first_marker_stamp(data: bytes) -> int | None:
    """The stamp of a ``visualization_msgs/MarkerArray``'s first marker (its header leads); None when empty."""
    reader = _Reader(data)
    return reader.stamp() if reader.uint32() else None
