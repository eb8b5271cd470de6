"""RoboFollow on the rig (``use_sim:=false``, default) or in SAPIEN (``use_sim:=true``).

The nodes and their parameters come from ``config/profiles/{rig,sim}.yaml`` through
``robofollow_ros.bringup.launch_profile`` — the same list ``robofollow bringup`` runs.
Arguments: use_sim, profile (a YAML path instead), trials, policy, output.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robofollow_ros.bringup import launch_profile

ARGUMENTS = {
    "use_sim": ("false", "true: SAPIEN simulation (profile sim); false: the physical rig (profile rig)"),
    "profile": ("", "a profile YAML to use instead of the one use_sim picks"),
    "trials": ("", "trials SPEC, e.g. 'scene=scene1 levels=L0 limit=2 rounds=1' (empty: the profile's)"),
    "policy": ("", "policy SPEC for policy_node (empty: the profile's)"),
    "output": ("", "run directory for the results (empty: the profile's / runs/ros-<time>)"),
}


def _nodes(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    profile = launch_profile(**values)
    return [
        Node(package="robofollow_ros", executable=spec.executable, name=spec.executable,
             parameters=[spec.parameters], output="screen", emulate_tty=True)
        for spec in profile.nodes
    ]


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes)])
