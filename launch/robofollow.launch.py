"""RoboFollow on the rig (``use_sim:=false``, default), in SAPIEN (``use_sim:=true``) or on mock hardware
(``use_mock_hardware:=true``).

The nodes, their parameters and remappings come from ``config/profiles/{rig,sim,mock}.yaml`` through
``robofollow_ros.bringup.launch_profile`` — the same list and the same choices ``robofollow bringup``
applies; the arguments are ``robofollow_ros.bringup.LAUNCH_ARGUMENTS`` (trial selection as
``robofollow eval``'s flags, policy, policy_kwargs, output, foxglove_host/port, calibration_dir,
driver_config, remap, remap_file, and ``rig:=NAME|PATH``: the rig, checked before any node starts and set as
every node's ``ROBOFOLLOW_RIG``; empty: the launch's own environment's, else the built-in rig). The launch
ends when the trial manager ends (its exit shuts the graph down), after it logged the score table; when the
trial manager exits with a failure status (trials that could not be executed, an unreachable policy) or is
killed by a signal other than the launch's own stop (SIGINT, SIGTERM), ``ros2 launch`` exits non-zero too,
naming it; a killed trial manager's run (when ``output`` names it) is closed as ``robofollow bringup`` closes it
(``evaluation.results.close_abandoned_run``).
"""

import signal

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robofollow_ros.bringup import LAUNCH_ARGUMENTS, TRIAL_MANAGER, foxglove_address, launch_profile
from robofollow_ros.bringup.running import describe_exit
from robofollow_ros.exit_status import EXIT_POLICY_UNREACHABLE, EXIT_TRIALS_FAILED

_FAILURES = {EXIT_TRIALS_FAILED: "some trials could not be executed (see policy_error and fault in results.json)",
             EXIT_POLICY_UNREACHABLE: "the policy could not be reached before the first trial"}
#: Signals the launch itself stops its nodes with (Ctrl-C, and its escalation): not a failure of the run.
_STOPPING = (signal.SIGINT, signal.SIGTERM)


def _trials_ended(event, context, run_dir=None):
    """The trial manager exited: shut the graph down; a failure status fails the launch as well."""
    actions = [Shutdown(reason="the trials ended")]
    code = event.returncode or 0
    shutting_down = context is not None and getattr(context, "is_shutdown", False)
    if code > 0:
        message = f"{TRIAL_MANAGER} exited with status {code}: {_FAILURES.get(code, 'see its log')}"
    elif code < 0 and -code not in _STOPPING and not shutting_down:
        message = f"{TRIAL_MANAGER} {describe_exit(code)}"
        if run_dir:
            from robofollow_ros.evaluation.results import close_abandoned_run

            if close_abandoned_run(run_dir, f"{message} before all trials ran; the trial under way was not recorded"):
                message += f"; its run in {run_dir} was marked failed"
    else:
        return actions

    def fail(_context):
        raise RuntimeError(message)

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
    run_dir = profile.node(TRIAL_MANAGER).parameters.get("output") if profile.has(TRIAL_MANAGER) else None
    for spec in profile.nodes:
        ends_the_run = spec.executable == TRIAL_MANAGER
        nodes.append(Node(
            package="robofollow_ros", executable=spec.executable, name=spec.executable,
            parameters=[spec.parameters], remappings=list(profile.remappings), output="screen", emulate_tty=True,
            additional_env=dict(profile.environment) or None,  # rig:= -> ROBOFOLLOW_RIG, which every node loads
            on_exit=(lambda event, context: _trials_ended(event, context, run_dir)) if ends_the_run else None))
    return nodes


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in LAUNCH_ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes)])
