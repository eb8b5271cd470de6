"""RoboFollow's TCP protocol (spec section f), both sides; see docs/protocols.md.

``codec`` (JSON messages with base64 NumPy arrays; the security boundary of the server),
``framing`` (4-byte length prefix, bounded reads), ``client`` (the ``tcp://HOST:PORT`` policy) and
``server`` (``robofollow serve``). Imports nothing of the other protocols.
"""
