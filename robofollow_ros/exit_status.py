"""Exit statuses of every ``robofollow`` command and node executable that runs trials.

One table for the CLI (eval, bringup, demo, collect, serve, ...) and the ROS executables (the trial
manager exits with the same codes under ``ros2 launch``), so scripts and CI tell the cases apart.
It sits on the ground floor because both the nodes and the CLI above them use it.
"""

#: The run finished and every trial was executed and scored -- whatever the scores are.
EXIT_OK = 0
#: An unexpected internal error (a bug): a traceback was printed.
EXIT_INTERNAL = 1
#: Bad input (unknown task, malformed file, bad flag or profile): the user must change the command.
EXIT_BAD_INPUT = 2
#: The run finished but some trials could not be executed (policy errors or timeouts, a worker that
#: died; on the ROS path also a fault: an e-stop, an operator's stop, a phase past its bound), or a node
#: of the ROS graph died and the run ended early: their results are recorded as failed-to-run,
#: distinct from "ran and scored low".
EXIT_TRIALS_FAILED = 3
#: The policy could not be reached before the first trial (connect + reset failed); nothing ran.
EXIT_POLICY_UNREACHABLE = 4
#: The output directory cannot be used: held by another process's lock, read-only, or the disk is full.
#: Everything recorded before the failure is kept; ``--resume`` continues once the cause is gone.
EXIT_OUTPUT_UNUSABLE = 5
#: A port this command must listen on is in use (Foxglove, policy servers).
EXIT_PORT_IN_USE = 6

#: Ctrl-C (SIGINT) of a ``robofollow`` command: the shells' convention, 128 + 2 (``eval`` also prints the
#: line that resumes the run).
EXIT_INTERRUPTED = 130

#: Every status above but EXIT_INTERRUPTED: a command that runs to its end never exits with another (no raw
#: signal numbers passed through).
EXIT_STATUSES = (EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_TRIALS_FAILED, EXIT_POLICY_UNREACHABLE,
                 EXIT_OUTPUT_UNUSABLE, EXIT_PORT_IN_USE)
