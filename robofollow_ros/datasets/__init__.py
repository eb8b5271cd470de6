"""Demonstrations and recorded trials as LeRobot v3.0 datasets (see docs/learning.md).

``lerobot_v3`` defines the on-disk format (features, ``meta/info.json``, path templates, stats);
``video`` encodes and concatenates the per-camera MP4 streams with PyAV; ``staging`` keeps each
finished episode whole on disk until ``writer`` assembles the dataset; ``collect`` records oracle
demonstrations in SAPIEN; ``bags`` converts ROS 2 bags (MCAP) of sim or rig runs; ``reader`` loads
a dataset back for training.
"""
