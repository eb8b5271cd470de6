"""RoboFollow on the rig (``use_sim:=false``, default), in SAPIEN (``use_sim:=true``) or on mock hardware
(``use_mock_hardware:=true``).

The nodes, their parameters and remappings come from ``config/profiles/{rig,sim,mock}.yaml`` through
``robofollow_ros.bringup.launch_profile`` — the same list and the same choices ``robofollow bringup``
applies; the arguments are ``robofollow_ros.bringup.LAUNCH_ARGUMENTS`` (trial selection as
``robofollow eval``'s flags, policy, policy_kwargs, output, foxglove_host/port, calibration_dir,
driver_config, remap, remap_file). The launch ends when the trial manager ends (its exit shuts the
graph down), after it logged the score table; when the trial manager exits with a failure status
(trials that could not be executed, an unreachable policy) ``ros2 launch`` exits non-zero too.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robofollow_ros.bringup import LAUNCH_ARGUMENTS, TRIAL_MANAGER, foxglove_address, launch_profile
from robofollow_ros.exit_status import EXIT_POLICY_UNREACHABLE, EXIT_TRIALS_FAILED

_FAILURES = {EXIT_TRIALS_FAILED: "some trials could not be executed (see policy_error in results.json)",
             EXIT_POLICY_UNREACHABLE: "the policy could not be reached before the first trial"}


def _trials_ended(event, context):
    """The trial manager exited: shut the graph down; a failure status fails the launch as well."""
    actions = [Shutdown(reason="the trials ended")]
    if event.returncode and event.returncode > 0:  # not when a signal (Ctrl-C) ended it
        why = _FAILURES.get(event.returncode, "see its log")

        def fail(_context):
            raise RuntimeError(f"{TRIAL_MANAGER} exited with status {event.returncode}: {why}")

        actions.insert(0, OpaqueFunction(function=fail))
    return actions


def _nodes(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    profile = launch_profile(**values)
    address = foxglove_address(profile)
    if address is not None:  # one line naming the port and the argument, not a dead foxglove_node
        from robofollow_ros.preflight import port_free

        port_free(*address, what="the live Foxglove view", flag="foxglove_port:=")
    nodes = []
    for spec in profile.nodes:
        ends_the_run = spec.executable == TRIAL_MANAGER
        nodes.append(Node(
            package="robofollow_ros", executable=spec.executable, name=spec.executable,
            parameters=[spec.parameters], remappings=list(profile.remappings), output="screen", emulate_tty=True,
            on_exit=_trials_ended if ends_the_run else None))
    return nodes


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in LAUNCH_ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes)])
