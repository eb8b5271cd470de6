#!/usr/bin/env bash
# Kept for scripts that call it by its old name: tools/build_ros_msgs.sh builds the ROS overlay,
# tf2_msgs included, with its default package set (tf2_msgs and interbotix_xs_msgs; the overlay
# is always rebuilt whole, so building tf2_msgs alone would drop the others).
#
#   bash tools/build_tf2_msgs.sh .venv   ==   bash tools/build_ros_msgs.sh .venv
set -euo pipefail
[ $# -le 1 ] || { echo "usage: bash tools/build_tf2_msgs.sh VENV_DIR   (e.g. .venv)" >&2; exit 2; }
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build_ros_msgs.sh" "${1:-.venv}"
