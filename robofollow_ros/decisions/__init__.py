"""One Word, Different Action (OWDA): decision anchors, tasks, solver/validator, models, metrics, execution.

ROS-free and light to import (no SAPIEN, torch or rclpy at module level). Modules, by meaning:
``anchors`` / ``authoring`` / ``capture`` (physical decision anchors), ``solver`` (symbolic tasks and
their unique decision), ``language`` (templates and the strict reader), ``candidates`` / ``generator``
(families at the benchmark's sizes), ``validate``, ``suite_io``, ``prompt`` / ``chat_client`` /
``deciders`` (decision models), ``metrics`` / ``evaluate``, ``execute`` / ``primitive`` /
``sim_primitives`` (SAPIEN). See docs/owda.md.
"""
