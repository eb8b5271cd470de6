"""robofollow-model-server: serve any policy object to RoboFollow from the model's own environment.

``robofollow eval --policy tcp://HOST:PORT`` (RoboFollow's TCP protocol) or ``openpi://HOST:PORT``
(openpi's websocket protocol) then drives the policy, as openpi's ``openpi-client`` works the other
way round: this package depends on numpy, msgpack and websockets only (no ROS, no SAPIEN, no torch
pin, nothing of robofollow_ros), so it installs beside any model stack, e.g. LeRobot's.

A policy is any object with ``reset()``, ``set_instruction(text)`` and ``predict(obs) -> [T, 14]``
(``close()`` optional); ``obs`` is RoboFollow's observation contract (three uint8 HWC RGB images
under ``observation.<camera>.rgb``, ``joint_action.vector`` with 14 joints, ``instruction``).

Modules: ``wire`` (both codecs, bounded), ``contract`` (the observation and action checks),
``tcp`` and ``openpi`` (the servers), ``serving`` (loading, lifecycle and clean shutdown),
``__main__`` (the CLI), ``lerobot`` (an adapter for LeRobot checkpoints; needs lerobot).
"""

__version__ = "0.1.0"
