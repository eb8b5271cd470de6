#!/usr/bin/env bash
# By hand, not in CI (about 2 min and 60 MB of downloads): the README's workspace venv beside rosdep's
# Python packages. A venv whose own site-packages come first and, behind them, .venv-olddeps's (PyPI's
# websockets 10.4 and OpenCV 4.6: rosdep's python3-websockets and python3-opencv on Debian 12 / Ubuntu
# 24.04), chained to this checkout's .venv (numpy 1.x, matplotlib, rclpy, sapien), as
# `python3 -m venv --system-site-packages` sits over /usr/lib/python3/dist-packages. Then:
#   doctor --quick fails naming websockets and OpenCV; the README's `pip install -c constraints.txt` line;
#   doctor --quick passes; `robofollow report` draws; an openpi:// policy runs a trial; ChArUco
#   calibration of the simulated head camera recovers its pose.
# Needs `make setup-tests` (.venv-olddeps). Exit 0 only when every step did what it should.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-/tmp/robofollow-ros-venv}
PORT=${PORT:-18931}
[ -x .venv-olddeps/bin/python ] || { echo "check_ros_venv.sh: no .venv-olddeps (run make setup-tests)" >&2; exit 1; }
rm -rf "$VENV" && .venv/bin/python -m venv "$VENV"
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
old=$(.venv-olddeps/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$old')" > "$site/zz_system_site.pth"
export PYTHONPATH=$ROOT
rf=("$VENV/bin/python" -m robofollow_ros.cli)
fail() { echo "check_ros_venv.sh: FAILED: $*" >&2; exit 1; }

echo "== doctor before the README's line (rosdep's websockets and OpenCV)"
"${rf[@]}" doctor --quick && fail "doctor passed with websockets 10.4 and OpenCV 4.6"
echo "== the README's line"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt \
  foxglove-sdk mcap rosbags mcap-ros2-support websockets opencv-python-headless || fail "pip install"
echo "== doctor after"
"${rf[@]}" doctor --quick || fail "doctor"
tmp=$(mktemp -d)
trap 'kill "${server:-0}" 2>/dev/null; rm -rf "$tmp"' EXIT
echo "== an openpi:// policy (the memorizer served over openpi's websocket)"
"${rf[@]}" serve --policy memorizer --protocol openpi --port "$PORT" > "$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 120); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.5; done
"${rf[@]}" eval --policy "openpi://127.0.0.1:$PORT" --tasks L0_pickup_red_cylinder --rounds 1 --max-steps 3 \
  --output "$tmp/run" || fail "eval over openpi:// (server log: $(tail -3 "$tmp/serve.log"))"
echo "== report"
"${rf[@]}" report "$tmp/run" --png "$tmp/report.png" && [ -s "$tmp/report.png" ] || fail "report"
echo "== ChArUco calibration (the simulated head camera)"
"${rf[@]}" calibrate sim-verify --cameras head --views 4 --intrinsic-views 8 || fail "calibration"
echo "check_ros_venv.sh: the README's venv beside rosdep's packages passes doctor and runs report, openpi and calibration"
