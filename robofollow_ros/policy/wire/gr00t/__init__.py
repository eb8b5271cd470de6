"""NVIDIA Isaac-GR00T's ZMQ policy protocol (N1.5 / N1.6 / N1.7 servers), both sides; see docs/protocols.md.

``codec`` (msgpack with ``.npy`` or msgpack-numpy arrays, decoded defensively, never unpickled),
``observation`` (RoboFollow ↔ GR00T modality keys: presets and a user key map), ``client`` (the
``gr00t://HOST:PORT`` policy) and ``server`` (``robofollow serve --protocol gr00t``). Imports nothing
of the other protocols.
"""
