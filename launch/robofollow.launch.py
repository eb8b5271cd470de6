"""RoboFollow on the rig (``use_sim:=false``, default), in SAPIEN (``use_sim:=true``) or on mock hardware
(``use_mock_hardware:=true``).

The nodes, their parameters and remappings come from ``config/profiles/{rig,sim,mock}.yaml`` through
``robofollow_ros.bringup.launch_profile`` — the same list and the same choices ``robofollow bringup``
applies; the arguments are ``robofollow_ros.bringup.LAUNCH_ARGUMENTS`` (trial selection as
``robofollow eval``'s flags, policy, policy_kwargs, output, foxglove_host/port, calibration_dir,
driver_config, remap, remap_file). The launch ends when the trial manager ends (its exit shuts the
graph down), after it logged the score table.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robofollow_ros.bringup import LAUNCH_ARGUMENTS, TRIAL_MANAGER, launch_profile


def _nodes(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    profile = launch_profile(**values)
    nodes = []
    for spec in profile.nodes:
        ends_the_run = spec.executable == TRIAL_MANAGER
        nodes.append(Node(
            package="robofollow_ros", executable=spec.executable, name=spec.executable,
            parameters=[spec.parameters], remappings=list(profile.remappings), output="screen", emulate_tty=True,
            on_exit=[Shutdown(reason="the trials ended")] if ends_the_run else None))
    return nodes


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in LAUNCH_ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes)])
