"""openpi's websocket protocol (π0 / π0.5 servers), both sides; see docs/protocols.md.

``codec`` (msgpack with ``__ndarray__`` maps, decoded defensively, never unpickled),
``observation`` (RoboFollow ↔ openpi ALOHA observations), ``client`` (the ``openpi://HOST:PORT``
policy) and ``server`` (``robofollow serve --protocol openpi``). Imports nothing of the other
protocols.
"""
