#!/usr/bin/env bash
# The CI matrix step (make test-matrix, after make test in .ci/run): builds or reuses the matrix venvs
# (tools/setup_matrix_envs.sh) and runs in each
#   .venv-py310, .venv-py312  (Jazzy's wheels) the ROS-free core's tests (CORE_TESTS) and the ROS-graph smoke
#   .venv-kilted              (Kilted's wheels, Python 3.11) the ROS-graph smoke
# The ROS-graph smoke (test/test_ros_smoke.py): bringup sim and bringup mock, one trial each, verdicts equal to
# the headless evaluator's; test_rclpy_compat.py checks the rclpy names that differ between releases.
# The default venv (.venv: Jazzy, Python 3.11, with torch and ray) runs the whole suite in make test.
#
#   bash tools/test_matrix.sh                  # all: 389 s from empty venvs with a warm pip cache (2 cores,
#                                              # load average 9.5, 2026-12-06): builds 217 s, tests 172 s
#   bash tools/test_matrix.sh py312            # one venv
set -euo pipefail
cd "$(dirname "$0")/.."

# The ROS-free core: the task registry, scoring, the rig's description, kinematics and safety filter, the policy
# wire codecs (robofollow TCP, openpi, XPolicyLab; byte order), the results store, YAML/JSON input limits, the
# policy interface, ROS message conversions, and this matrix's own checks (manifest, requirements, doctor). None needs torch, ray, a renderer or a ROS graph; each file is
# seconds to a minute. The tests that need torch (train, learned policies, the model server) or ray (eval
# --backend ray) are outside it, by file: they run in .venv in make test.
CORE_TESTS=(
  test/test_registry.py test/test_scoring_properties.py test/test_scoring_scene1.py
  test/test_rig_description.py test/test_rig_kinematics.py test/test_rig_safety.py test/test_sim_kinematics.py
  test/test_protocol_byte_order.py test/test_protocol_robofollow_tcp.py test/test_protocol_openpi.py
  test/test_protocol_xpolicylab.py test/test_results_store.py test/test_yamlio.py test/test_jsonlimits.py
  test/test_policy_interface.py test/test_node_conversions.py test/test_package_manifest.py
  test/test_compose_requirements.py test/test_doctor_distro.py
)
# Two whole-evaluation tests of those files (30 s each on 2 loaded cores) run in make test only.
CORE_DESELECT=(
  --deselect test/test_sim_kinematics.py::test_every_task_source_is_reachable_top_down_by_the_task_arm
  --deselect test/test_protocol_xpolicylab.py::test_eval_through_the_stub_scores_the_memorizer_as_in_process
)
SMOKE_TESTS=(test/test_rclpy_compat.py test/test_ros_smoke.py)

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(py310 py312 kilted)
start=$(date +%s)
bash tools/setup_matrix_envs.sh "${names[@]}"
for name in "${names[@]}"; do
  venv=.venv-$name
  case "$name" in
    kilted) tests=("${SMOKE_TESTS[@]}") ;;
    *) tests=("${CORE_TESTS[@]}" "${CORE_DESELECT[@]}" "${SMOKE_TESTS[@]}") ;;
  esac
  echo "==> $venv ($("$venv/bin/python" --version), ros-rclpy $("$venv/bin/python" -c \
        'import importlib.metadata as m; print(m.version("ros-rclpy"))'))"
  t0=$(date +%s)
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}"
  echo "==> $venv passed in $(( $(date +%s) - t0 )) s"
done
echo "==> test matrix (${names[*]}) passed in $(( $(date +%s) - start )) s"
