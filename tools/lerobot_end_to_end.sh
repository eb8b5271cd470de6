#!/usr/bin/env bash
# By hand, not in CI (minutes of CPU): RoboFollow demonstrations -> LeRobot's own training (ACT on the
# CPU, STEPS steps) -> the checkpoint served from LeRobot's environment by robofollow-model-server ->
# `robofollow eval --policy tcp://...`, then the same checkpoint served over openpi's websocket ->
# `robofollow eval --policy openpi://...`. After each eval the server gets SIGTERM and must exit 0 within
# its --grace (GRACE s) without a C++ abort. Prints each stage's time and each server's exit status and
# stop time, then a summary; docs/learning.md and docs/protocols.md record a run.
#   STEPS=300 WORK=/tmp/lr-e2e bash tools/lerobot_end_to_end.sh
# Given a WORK that already holds a finished dataset (WORK/ds), the collect stage reuses it; training
# writes a fresh WORK/train (lerobot-train refuses an existing output directory).
# RF: how to run the robofollow CLI (default .venv/bin/robofollow), e.g. from a worktree without .venv:
#   RF="env PYTHONPATH=$PWD /path/to/.venv/bin/python -m robofollow_ros.cli"
# PROTOCOLS: which of them to evaluate over (default both: "robofollow openpi").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-300}
WORK=${WORK:-$(mktemp -d)}
RF=${RF:-$ROOT/.venv/bin/robofollow}
TASKS=${TASKS:-pickup_yellow_block_1_left,push_left_cube_to_red_cylinder}
EVAL_TASKS=${EVAL_TASKS:-L0_pickup_yellow_block_1_left,L0_push_left_cube_to_red_cylinder}
PROTOCOLS=${PROTOCOLS:-robofollow openpi}
GRACE=${GRACE:-30}
MAX_STEPS=${MAX_STEPS:-5}
LR=$ROOT/.venv-lerobot/bin
bash tools/setup_lerobot_env.sh
stage() { echo "==> $(date +%T) $*"; }
SUMMARY=()

SECONDS=0
if [ -f "$WORK/ds/meta/info.json" ]; then  # a WORK given again: its finished dataset is used as it is
  stage "collect: reusing the dataset in $WORK/ds"; SUMMARY+=("collect: reused $WORK/ds")
else
  stage "collect: 4 episodes per task, 64x48 cameras"
  $RF collect --output "$WORK/ds" --tasks "$TASKS" --episodes-per-task 4 --image-size 64x48 --vcodec h264 --workers 2
  echo "collect took ${SECONDS}s"; SUMMARY+=("collect ${SECONDS}s")
fi

SECONDS=0
stage "lerobot-train: ACT, $STEPS steps, CPU"
rm -rf "$WORK/train"
"$LR/lerobot-train" --dataset.repo_id=robofollow/demos --dataset.root="$WORK/ds" --dataset.video_backend=pyav \
  --policy.type=act --policy.device=cpu --policy.push_to_hub=false --policy.pretrained_backbone_weights=null \
  --policy.chunk_size=10 --policy.n_action_steps=8 --policy.dim_model=128 --policy.dim_feedforward=512 \
  --policy.n_encoder_layers=2 --policy.n_decoder_layers=1 \
  --steps="$STEPS" --batch_size=8 --num_workers=0 --save_freq="$STEPS" --log_freq="$(( STEPS < 50 ? STEPS : 50 ))" --eval_freq=0 \
  --wandb.enable=false --output_dir="$WORK/train" --job_name=robofollow_act
CKPT="$WORK/train/checkpoints/last/pretrained_model"
echo "training took ${SECONDS}s; checkpoint $CKPT"; SUMMARY+=("lerobot-train ($STEPS steps) ${SECONDS}s")

# serve_and_eval PROTOCOL SCHEME: serve the checkpoint from .venv-lerobot over PROTOCOL, run
# `robofollow eval --policy SCHEME://...` through it, SIGTERM the server, check it exits 0 within GRACE s.
serve_and_eval() {
  local proto=$1 scheme=$2 out="$WORK/serve-$1" run="$WORK/run-$1" server port t0 stop_ms status=0 eval_status=0 ran=0
  stage "serve from .venv-lerobot over $proto; eval over $scheme://"
  rm -rf "$run" "$run.stdout"  # a reused WORK keeps its dataset, never an earlier run's results
  SECONDS=0
  "$LR/python" -m robofollow_model_server --protocol "$proto" --policy robofollow_model_server.lerobot:load \
    --kwargs "{\"checkpoint\": \"$CKPT\"}" --port 0 --grace "$GRACE" > "$out.out" 2> "$out.err" &
  server=$!
  for _ in $(seq 600); do grep -q "^Policy server" "$out.out" 2>/dev/null && break; kill -0 $server || break; sleep 0.2; done
  port=$(sed -n 's/^Policy server: .*:\([0-9]*\)$/\1/p' "$out.out")
  [ -n "$port" ] || { echo "the $proto server did not start"; tail -5 "$out.err"; kill -KILL $server; return 1; }
  echo "server ($proto) listening on $port after ${SECONDS}s"; SUMMARY+=("serve $proto: up ${SECONDS}s")
  SECONDS=0
  $RF eval --policy "$scheme://127.0.0.1:$port" --tasks "$EVAL_TASKS" --rounds 1 --max-steps "$MAX_STEPS" \
    --output "$run" --json > "$run.stdout" || eval_status=$?
  echo "eval over $scheme:// took ${SECONDS}s, exit status $eval_status"
  SUMMARY+=("eval $scheme:// ${SECONDS}s, exit $eval_status")
  t0=$(date +%s%N)
  kill -TERM $server
  wait $server || status=$?
  stop_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "server ($proto) exit status $status, ${stop_ms} ms after SIGTERM (grace ${GRACE}s)"; tail -2 "$out.err"
  SUMMARY+=("server $proto: exit $status ${stop_ms} ms after SIGTERM")
  "$LR/python" - "$run/results.json" "$scheme" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))
entries = results["results"] if isinstance(results, dict) else results
for e in entries:
    print(sys.argv[2], e["task"], "policy steps", e["policy_steps"], "intent_ok", e["intent_ok"],
          "exec_ok", e["exec_ok"], "error", e.get("policy_error"))
assert entries and all("policy_error" not in e and e.get("policy_steps", 0) > 0 for e in entries), "a trial did not run"
PY
  ran=$?
  [ "$ran" = 0 ] && [ "$eval_status" = 0 ] && [ "$status" = 0 ] && [ "$stop_ms" -le $(( GRACE * 1000 )) ] \
    && ! grep -q "terminate called" "$out.err"
}

declare -A SCHEME=([robofollow]=tcp [openpi]=openpi)
FAILED=()
for proto in $PROTOCOLS; do
  serve_and_eval "$proto" "${SCHEME[$proto]}" || FAILED+=("$proto")  # (set -e is off inside: each check is explicit)
done
echo "==> summary"; printf '  %s\n' "${SUMMARY[@]}"
[ ${#FAILED[@]} = 0 ] || { echo "FAILED over: ${FAILED[*]} ($WORK)"; exit 1; }
echo "OK: $WORK"
