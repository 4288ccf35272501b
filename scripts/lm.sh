#!/usr/bin/env bash
# The language-model job: generate, build and train a byte-level model of specs/ (default
# specs/gpt_char.cannl) on the King James Bible, then sample a passage from the trained
# inference program.
#
#   scripts/lm.sh [--model NAME] [--seconds S] [training program's flags...]
#   NAME: a spec specs/NAME.cannl with token inputs `tokens` and `next` (default gpt_char;
#         llama_char is the Llama-style model of contract v2: RMSNorm, RoPE, grouped-query
#         attention, SwiGLU, Muon + AdamW; speedrun_char the modded-nanoGPT-style one: RoPE,
#         QK-norm, ReLU², a logit soft-cap, Muon + AdamW)
#   S: a wall-clock budget for the training instead of a step count: a 40-step trial run with
#      the same flags times a step (its metrics log's elapsed seconds every 5 steps from step
#      10 on: the fastest 5 steps, the speed of a quiet machine, which a shared one shows
#      between its busy moments), and the training runs as many steps as fit in S seconds at
#      that speed (its validations take a few per cent more; on a loaded machine the wall
#      time, printed, is longer). Models compared on one budget each get the steps their own
#      speed allows, each with its lr decay over its whole run. (On a machine whose load
#      changes, trials minutes apart are not comparable: bench/README.md's comparison times
#      the models in interleaved trials and gives each its --steps.)
#
#   scripts/kjv-data.sh -> data/kjv/train.txt (3.96 MB), data/kjv/val.txt (0.44 MB), raw bytes
#   specs/gpt_char.cannl (4 blocks, width 128, ctx 128, 0.85 M params)
#     -> cannl gen -> plain C -> CMake/Ninja -> build/release/gpt_char_train, gpt_char_infer
#     -> trains STEPS steps (default 600) of 32 random windows on 2 threads (the spec's optimisers,
#        their lr with a cosine decay over the run), validating on 10 fixed batches of val.txt
#        every 100 steps; prints the validation loss (nats per byte)
#     -> gpt_char_infer --generate 300 --prompt "And God said" --temperature 0.8 --top-k 40
#        (on the model's KV cache: one single-position step per byte)
#   (NAME_train and NAME_infer the same way for another NAME, with the same budget.)
# Extra arguments go to the training program (e.g. --steps 2000, --threads 4).
set -euo pipefail
cd "$(dirname "$0")/.."
# --model NAME (or --model=NAME), taken out of the arguments wherever it stands.
model=gpt_char
seconds=
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) [ $# -ge 2 ] || { echo "lm.sh: --model needs a spec name" >&2; exit 2; }
             model=$2; shift 2 ;;
    --model=*) model=${1#--model=}; shift ;;
    --seconds) [ $# -ge 2 ] || { echo "lm.sh: --seconds needs a number of seconds" >&2; exit 2; }
               seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    *) rest+=("$1"); shift ;;
  esac
done
set -- ${rest[@]+"${rest[@]}"}
[ -f "specs/$model.cannl" ] || { echo "lm.sh: no spec specs/$model.cannl" >&2; exit 2; }
if [ -n "$seconds" ]; then
  [[ "$seconds" =~ ^[1-9][0-9]*$ ]] ||
    { echo "lm.sh: --seconds $seconds: expected a whole number of seconds" >&2; exit 2; }
  for a in "$@"; do
    case "$a" in
      --steps|--steps=*) echo "lm.sh: --seconds sets the step count: give --seconds or --steps, not both" >&2; exit 2 ;;
    esac
  done
fi
scripts/install-deps.sh --data
scripts/kjv-data.sh data/kjv
cmake --preset release >/dev/null
cmake --build --preset release --target "${model}_train" "${model}_infer"

out=build/release/lm
mkdir -p "$out"
echo "== generated C: build/release/cannl/$model/ (the spec: specs/$model.cannl)"
# The defaults, each left out when the extra arguments give the flag (the training program
# refuses a flag given twice).
set_default() {  # set_default FLAG VALUE
  local a
  for a in "${extra[@]}"; do
    [ "$a" = "$1" ] || [ "${a%%=*}" = "$1" ] && return
  done
  args+=("$1" "$2")
}
extra=("$@")
train_args() {  # train_args STEPS LOG_EVERY METRICS CHECKPOINT: sets args
  args=()
  local kv
  for kv in "--stream tokens,next=data/kjv/train.txt" "--val-stream tokens,next=data/kjv/val.txt" \
            "--steps $1" "--batch 32" "--lr-schedule cosine" "--eval-every 100" "--eval-batches 10" \
            "--seed 1" "--threads 2" "--log-every $2" "--checkpoint $4" "--metrics $3"; do
    set_default "${kv%% *}" "${kv#* }"
  done
}
steps=${STEPS:-600}
if [ -n "$seconds" ]; then
  # The trial: 40 steps, timed from the metrics log's elapsed seconds every 5 steps.
  train_args 40 5 "$out/$model.trial.jsonl" "$out/$model.trial.safetensors"
  rm -f "$out/$model.trial.jsonl"
  build/release/${model}_train "${args[@]}" "$@" >/dev/null
  read -r step_s steps < <(python3 - "$out/$model.trial.jsonl" "$seconds" <<'EOF'
import json, sys
t = {r["step"]: r["elapsed"] for r in map(json.loads, open(sys.argv[1])) if "train_loss" in r}
step_s = min(t[k + 5] - t[k] for k in range(10, 40, 5)) / 5
print(f"{step_s:.4f} {max(1, int(float(sys.argv[2]) / step_s))}")
EOF
)
  rm -f "$out/$model.trial.jsonl" "$out/$model.trial.safetensors"
  echo "== budget $seconds s: a trial's fastest 5 steps took $step_s s a step: $steps steps"
fi
start=$(date +%s.%N)
train_args "$steps" 50 "$out/$model.jsonl" "$out/$model.safetensors"
build/release/${model}_train "${args[@]}" "$@"
end=$(date +%s.%N)
echo "== training wall time: $(awk "BEGIN { printf \"%.1f\", $end - $start }") s"
echo "== checkpoint: $out/$model.safetensors   metrics: $out/$model.jsonl"
echo "== sample (${model}_infer --generate 300 --prompt \"And God said\" --temperature 0.8 --top-k 40 --seed 1):"
build/release/${model}_infer --weights "$out/$model.safetensors" --threads 2 \
  --generate 300 --prompt "And God said" --temperature 0.8 --top-k 40 --seed 1
echo
