"""Live monitoring in Foxglove, MCAP recording of every trial, replay and re-scoring (ROS-free).

- ``channels.TrialChannels``: the channels one trial is logged through (cameras, 3-D scene, TF,
  joints, live score, trial state, scorer frames, log lines), on a ``foxglove.Context``.
- ``scene.SceneBuilder``: registry + scorer frame -> ``SceneUpdate``.
- ``recorder.TrialRecorder``: the ``run_episode`` observer writing ``<output>/mcap/<trial>.mcap``.
- ``server.start_monitor_server``: the websocket server with the trial-control services.
- ``replay``: read a (possibly truncated) recording and re-score it.
- ``ws_client.FoxgloveProbe``: a protocol client for tests and benchmarks.

See docs/foxglove.md.
"""
