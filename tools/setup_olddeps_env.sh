#!/usr/bin/env bash
# Idempotent: .venv-olddeps, the environment test_doctor_versions.py runs `robofollow doctor` in.
# It layers like a venv made with --system-site-packages over a ROS install, the other way round: its
# own site-packages hold rosdep's too-old websockets and OpenCV (tools/olddeps-requirements.txt), and
# a .pth file adds the base venv's site-packages (every other package, same interpreter) behind them.
# .venv-olddeps/numpy2 holds numpy 2 alone, put in front with PYTHONPATH: what sapien pulls in without
# constraints.txt. About a minute the first time (OpenCV 4.6 and numpy 2 are ~65 MB), nothing after.
# rclpy does not load there (the ROS wheels find their libraries from sys.prefix): the test runs
# `doctor --quick`, the version checks.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-olddeps
BASE=${BASE_VENV:-.venv}
NUMPY2=numpy==2.2.6
[ -x "$BASE/bin/python" ] || { echo "setup_olddeps_env.sh: no $BASE/bin/python (run tools/setup_env.sh)" >&2; exit 1; }
base_site=$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
stamp="$VENV/.olddeps"
want=$( (sha256sum tools/olddeps-requirements.txt; echo "$base_site $NUMPY2") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> creating $VENV (rosdep's too-old websockets and OpenCV in front of $BASE, for test_doctor_versions.py)"
  rm -rf "$VENV"
  "$BASE/bin/python" -m venv "$VENV"  # the base venv's interpreter, so its compiled packages load
  pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps)
  "${pip[@]}" -r tools/olddeps-requirements.txt
  "${pip[@]}" --target "$VENV/numpy2" "$NUMPY2"
  own_site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "import site; site.addsitedir('$base_site')" > "$own_site/zz_robofollow_base_venv.pth"
  "$VENV/bin/python" -c "import websockets, cv2, foxglove; assert websockets.__version__ == '10.4', websockets.__version__"
  echo "$want" > "$stamp"
fi
