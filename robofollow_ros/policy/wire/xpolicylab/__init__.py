"""XPolicyLab's websocket protocol (``client_server/ws/`` in XPolicyLab), the client side only.

``codec`` (msgpack with msgpack-numpy's ``nd``/``kind`` arrays, decoded defensively, never
unpickled), ``messages`` (the envelope, message types and error codes), ``observation`` (RoboFollow
→ XPolicyLab's RoboTwin-style v1.0 observation and the action chunk back) and ``client`` (the
``xpolicylab://HOST:PORT`` policy). We offer no XPolicyLab server. Imports nothing of the other
protocols.
"""
