"""Live monitoring in Foxglove, every trial recorded as a ROS 2 bag, replay and re-scoring (ROS-free).

- ``topics``: the recording contract (topic, ROS 2 type, offered QoS); ``rosmsg``: ROS 2 messages
  built and serialized without ROS (rosbags); ``bagfile``: the rosbag2 conventions of one file.
- ``channels.TrialChannels``: the recording and the live view, one set of ros2msg/cdr channels each.
- ``trial_log.TrialLog``, ``stages``, ``scene.SceneBuilder``, ``robot.RobotModel``: a trial's messages.
- ``recorder.TrialRecorder``: the ``run_episode`` observer writing ``<output>/mcap/<trial>.mcap``.
- ``session.LiveSession``: one recording per trial from the graph's streams (foxglove_node's core).
- ``server.start_monitor_server``: the websocket server with the trial-control services; ``rig_assets``:
  the robot's meshes for it (``package://`` URIs in the live description, an allow-listed asset handler).
- ``replay``: read a (possibly truncated) recording and re-score it; ``picture``: draw one moment.
- ``layout``: the Foxglove layout; ``ws_client.FoxgloveProbe``: a protocol client for tests and benchmarks.

See docs/foxglove.md.
"""
