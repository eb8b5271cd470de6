"""RoboFollow on the physical rig: ``robofollow.launch.py use_sim:=false`` (profile config/profiles/rig.yaml).

Every other argument of ``robofollow.launch.py`` (``rig:=``, ``policy:=`` ...) passes through.
"""

from pathlib import Path

from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource


def generate_launch_description():
    main = str(Path(__file__).resolve().parent / "robofollow.launch.py")
    return LaunchDescription([
        IncludeLaunchDescription(PythonLaunchDescriptionSource(main), launch_arguments={"use_sim": "false"}.items()),
    ])
