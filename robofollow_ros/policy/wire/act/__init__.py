"""The "json_numpy ``POST /act``" protocol family, both sides; see docs/protocols.md.

Spoken by openvla-oft's ``vla-scripts/deploy.py``, X-VLA's ``model.run`` server, GR00T's
``gr00t/eval/http_server.py`` and the AutoEval template: HTTP ``POST /act`` with a JSON body whose
NumPy arrays are json_numpy maps. ``codec`` (json_numpy, decoded defensively, double encoding),
``presets`` (each peer's keys, image size, action layout and gripper convention, plus a user key
map), ``client`` (the ``act+http://HOST:PORT[/PATH][?preset=...]`` policy) and ``server``
(``robofollow serve --protocol act``). Imports nothing of the other protocols.
"""
