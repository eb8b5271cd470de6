#!/usr/bin/env bash
# By hand, not in CI (minutes of CPU): RoboFollow demonstrations -> LeRobot's own training (ACT on the
# CPU, STEPS steps) -> the checkpoint served from LeRobot's environment by robofollow-model-server ->
# `robofollow eval --policy tcp://...`. Prints each stage's time; docs/protocols.md records a run.
#   STEPS=300 WORK=/tmp/lr-e2e bash tools/lerobot_end_to_end.sh
# RF: how to run the robofollow CLI (default .venv/bin/robofollow).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${STEPS:-300}
WORK=${WORK:-$(mktemp -d)}
RF=${RF:-$ROOT/.venv/bin/robofollow}
TASKS=${TASKS:-pickup_yellow_block_1_left,push_left_cube_to_red_cylinder}
EVAL_TASKS=${EVAL_TASKS:-L0_pickup_yellow_block_1_left,L0_push_left_cube_to_red_cylinder}
LR=$ROOT/.venv-lerobot/bin
bash tools/setup_lerobot_env.sh
stage() { echo "==> $(date +%T) $*"; }

SECONDS=0
stage "collect: 4 episodes per task, 64x48 cameras"
$RF collect --output "$WORK/ds" --tasks "$TASKS" --episodes-per-task 4 --image-size 64x48 --vcodec h264 --workers 2
echo "collect took ${SECONDS}s"

SECONDS=0
stage "lerobot-train: ACT, $STEPS steps, CPU"
"$LR/lerobot-train" --dataset.repo_id=robofollow/demos --dataset.root="$WORK/ds" --dataset.video_backend=pyav \
  --policy.type=act --policy.device=cpu --policy.push_to_hub=false --policy.pretrained_backbone_weights=null \
  --policy.chunk_size=10 --policy.n_action_steps=8 --policy.dim_model=128 --policy.dim_feedforward=512 \
  --policy.n_encoder_layers=2 --policy.n_decoder_layers=1 \
  --steps="$STEPS" --batch_size=8 --num_workers=0 --save_freq="$STEPS" --log_freq=50 --eval_freq=0 \
  --wandb.enable=false --output_dir="$WORK/train" --job_name=robofollow_act
CKPT="$WORK/train/checkpoints/last/pretrained_model"
echo "training took ${SECONDS}s; checkpoint $CKPT"

stage "serve from .venv-lerobot; eval over tcp://"
"$LR/python" -m robofollow_model_server --policy robofollow_model_server.lerobot:load \
  --kwargs "{\"checkpoint\": \"$CKPT\"}" --port 0 > "$WORK/serve.out" 2> "$WORK/serve.err" &
SERVER=$!
for _ in $(seq 600); do grep -q "Policy server" "$WORK/serve.out" 2>/dev/null && break; kill -0 $SERVER; sleep 0.2; done
PORT=$(sed -n 's/^Policy server: .*:\([0-9]*\)$/\1/p' "$WORK/serve.out")
SECONDS=0
$RF eval --policy "tcp://127.0.0.1:$PORT" --tasks "$EVAL_TASKS" --rounds 1 --max-steps 5 --output "$WORK/run" --json
echo "eval took ${SECONDS}s"
kill -TERM $SERVER
status=0; wait $SERVER || status=$?
echo "server exit status $status"; tail -2 "$WORK/serve.err"
"$LR/python" - "$WORK/run/results.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))
entries = results["results"] if isinstance(results, dict) else results
for e in entries:
    print(e["task"], "policy steps", e["policy_steps"], "intent_ok", e["intent_ok"], "exec_ok", e["exec_ok"],
          "error", e.get("policy_error"))
assert entries and all("policy_error" not in e and e.get("policy_steps", 0) > 0 for e in entries), "a trial did not run"
PY
[ "$status" = 0 ] && ! grep -q "terminate called" "$WORK/serve.err"
echo "OK: $WORK"
