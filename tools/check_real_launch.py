"""Run the launch files with the real ROS 2 ``launch`` / ``launch_ros`` code, as ``ros2 launch`` does.

PyPI has no ``launch`` or ``launch_ros``, so the test suite checks the launch files with a stand-in
(``test/test_launch_files.py``). This script is the check against the real thing, for a machine
that has their sources (e.g. clones of github.com/ros2/launch and github.com/ros2/launch_ros, plus
``pip install --target DEPS osrf-pycommon``, and — since ``launch_ros.actions`` imports the service
types of composable nodes, which this package never uses — a stand-in ``composition_interfaces.srv``
with ``LoadNode``, ``UnloadNode`` and ``ListNodes``); nothing of theirs is part of this repository.

It installs the package into a prefix as ``colcon build`` does (``setup.py install --prefix``: the
ament index marker, ``share/robofollow_ros``, the console scripts under ``lib/robofollow_ros``), hides
the source checkout (an editable install would otherwise win), then runs ``LaunchService`` — the call
``ros2 launch`` makes — on the installed ``share/robofollow_ros/launch/mock.launch.py`` three times:
a run that must complete its trials and end by itself, a run against an unreachable policy that
must end at once with a non-zero status naming the address, and an endless run stopped with Ctrl-C
(SIGINT) that must end with every node finishing cleanly.

    .venv/bin/python tools/check_real_launch.py --path /tmp/launch_src/launch --path /tmp/launch_src/launch_ros \\
        --path /tmp/launch_deps --path /tmp/launch_stubs
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robofollow_ros.nodes.catalog import NODE_ENTRY_POINTS  # noqa: E402

RUNNER = """
import sys
from launch import LaunchDescription, LaunchService
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
arguments = dict(a.split(":=", 1) for a in sys.argv[2:])
service = LaunchService(argv=sys.argv[2:])
service.include_launch_description(LaunchDescription([IncludeLaunchDescription(
    PythonLaunchDescriptionSource(sys.argv[1]), launch_arguments=arguments.items())]))
sys.exit(service.run())
"""


#: Put first on PYTHONPATH: drops the venv's editable-install finder, so the installed copy is imported.
HIDE_SOURCE = """import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (getattr(f, "__module__", "") + repr(f)).lower()]
"""


def install_prefix(prefix: Path, work: Path) -> Path:
    """``setup.py install`` into ``prefix`` as colcon's ament_python build does; returns its site-packages."""
    build = work / "build"
    build.mkdir()
    done = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(build), "build",
                           "--build-base", str(build / "build"), "install", "--prefix", str(prefix), "--record",
                           str(build / "install.txt"), "--single-version-externally-managed"],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"setup.py install failed:\n{done.stderr[-3000:]}")
    for name in [*NODE_ENTRY_POINTS, "robofollow"]:
        if not (prefix / "lib" / "robofollow_ros" / name).is_file():
            raise SystemExit(f"{prefix}/lib/robofollow_ros/{name} was not installed")
    (work / "hide_source").mkdir()
    (work / "hide_source" / "sitecustomize.py").write_text(HIDE_SOURCE)
    return next((prefix / "lib").glob("python3*/site-packages"))


#: A DDS domain of this check's own: other runs on the machine (a demo in domain 0) must not be heard.
DOMAIN = str(1 + (os.getpid() * 7919 + time.time_ns() // 1000) % 200)


def _command(paths: list[str], prefix: Path, arguments: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    site = next((prefix / "lib").glob("python3*/site-packages"))
    env = dict(os.environ, AMENT_PREFIX_PATH=os.pathsep.join(filter(None, [str(prefix),
                                                                           os.environ.get("AMENT_PREFIX_PATH")])),
               PYTHONPATH=os.pathsep.join([str(prefix.parent / "hide_source"), str(site), *paths]),
               ROS_DOMAIN_ID=os.environ.get("ROS_DOMAIN_ID", DOMAIN))
    launch_file = prefix / "share" / "robofollow_ros" / "launch" / "mock.launch.py"
    return [sys.executable, "-c", RUNNER, str(launch_file), *(f"{k}:={v}" for k, v in arguments.items())], env


def launch(paths: list[str], prefix: Path, arguments: dict[str, str], timeout: float) -> tuple[int, str, float]:
    command, env = _command(paths, prefix, arguments)
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launch and every node it started
        out, _ = proc.communicate()
        out += f"\n(timed out after {timeout:.0f} s)"
    return proc.returncode, out, time.monotonic() - started


def interrupt(paths: list[str], prefix: Path, arguments: dict[str, str], timeout: float) -> tuple[int, str]:
    """Start an endless run, wait for its first trial to run, press Ctrl-C (SIGINT), collect the output."""
    command, env = _command(paths, prefix, arguments)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    lines = []
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        lines.append(line)
        if "table laid out" in line or time.monotonic() > deadline:
            break
    time.sleep(2.0)  # let the trial run a little: Ctrl-C lands mid-trial, as a user's would
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole foreground group
    try:
        rest, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate()
        rest += f"\n(still running {timeout:.0f} s after Ctrl-C)"
    return proc.returncode, "".join(lines) + rest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", action="append", required=True, help="a PYTHONPATH entry with launch, launch_ros ...")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "install"
        install_prefix(prefix, Path(tmp))
        out = Path(tmp) / "run"
        common = {"tasks": "L0_pickup_red_cylinder", "rounds": "1", "max_steps": "2", "foxglove_port": "0"}
        code, log, took = launch(args.path, prefix, {**common, "output": str(out)}, args.timeout)
        run = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else {}
        results = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else []
        ok = code == 0 and run.get("status") == "complete" and len(results) == 1 and "over ROS" in log
        print(f"mock launch: exit {code} after {took:.0f} s, run {run.get('status')}, {len(results)} trial(s): "
              f"{'OK' if ok else 'FAILED'}")
        if not ok:
            print(log[-4000:])
            return 1
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            address = f"tcp://127.0.0.1:{unused.getsockname()[1]}"
            code, log, took = launch(args.path, prefix, {**common, "output": str(Path(tmp) / "run2"),
                                                         "policy": address}, args.timeout)
        ok = code != 0 and address in log and "status 4" in log
        print(f"unreachable policy: exit {code} after {took:.0f} s, names {address}: {'OK' if ok else 'FAILED'}")
        if not ok:
            print(log[-4000:])
            return 1
        endless = Path(tmp) / "run3"
        code, log = interrupt(args.path, prefix, {**common, "max_steps": "100000", "output": str(endless)},
                              args.timeout)
        clean = log.count("process has finished cleanly")
        run = json.loads((endless / "run.json").read_text()) if (endless / "run.json").is_file() else {}
        ok = clean == len(NODE_ENTRY_POINTS) - 2 and "Traceback" not in log and "never retrieved" not in log \
            and run.get("status") == "failed" and "interrupted" in str(run.get("error"))
        print(f"Ctrl-C: exit {code}, {clean} nodes finished cleanly, run {run.get('status')} "
              f"({run.get('error')}): {'OK' if ok else 'FAILED'}")
        if not ok:
            print(log[-4000:])
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
