#!/usr/bin/env bash
# The language-model job: generate, build and train a byte-level model of specs/ (default
# specs/gpt_char.cannl) on the King James Bible, then sample a passage from the trained
# inference program.
#
#   scripts/lm.sh [--model NAME] [training program's flags...]
#   NAME: a spec specs/NAME.cannl with token inputs `tokens` and `next` (default gpt_char;
#         llama_char is the Llama-style model of contract v2: RMSNorm, RoPE, grouped-query
#         attention, SwiGLU, Muon + AdamW)
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
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) [ $# -ge 2 ] || { echo "lm.sh: --model needs a spec name" >&2; exit 2; }
             model=$2; shift 2 ;;
    --model=*) model=${1#--model=}; shift ;;
    *) rest+=("$1"); shift ;;
  esac
done
set -- ${rest[@]+"${rest[@]}"}
[ -f "specs/$model.cannl" ] || { echo "lm.sh: no spec specs/$model.cannl" >&2; exit 2; }
scripts/install-deps.sh --data
scripts/kjv-data.sh data/kjv
cmake --preset release >/dev/null
cmake --build --preset release --target "${model}_train" "${model}_infer"

out=build/release/lm
mkdir -p "$out"
echo "== generated C: build/release/cannl/$model/ (the spec: specs/$model.cannl)"
start=$(date +%s.%N)
# The defaults, each left out when the extra arguments give the flag (the training program
# refuses a flag given twice).
args=()
set_default() {  # set_default FLAG VALUE
  local a
  for a in "${extra[@]}"; do
    [ "$a" = "$1" ] || [ "${a%%=*}" = "$1" ] && return
  done
  args+=("$1" "$2")
}
extra=("$@")
for kv in "--stream tokens,next=data/kjv/train.txt" "--val-stream tokens,next=data/kjv/val.txt" \
          "--steps ${STEPS:-600}" "--batch 32" "--lr-schedule cosine" "--eval-every 100" "--eval-batches 10" \
          "--seed 1" "--threads 2" "--log-every 50" "--checkpoint $out/$model.safetensors" \
          "--metrics $out/$model.jsonl"; do
  set_default "${kv%% *}" "${kv#* }"
done
build/release/${model}_train "${args[@]}" "$@"
end=$(date +%s.%N)
echo "== training wall time: $(awk "BEGIN { printf \"%.1f\", $end - $start }") s"
echo "== checkpoint: $out/$model.safetensors   metrics: $out/$model.jsonl"
echo "== sample (${model}_infer --generate 300 --prompt \"And God said\" --temperature 0.8 --top-k 40 --seed 1):"
build/release/${model}_infer --weights "$out/$model.safetensors" --threads 2 \
  --generate 300 --prompt "And God said" --temperature 0.8 --top-k 40 --seed 1
echo
