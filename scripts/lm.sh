#!/usr/bin/env bash
# The language-model job: generate, build and train the byte-level GPT of specs/gpt_char.cannl
# on the King James Bible, then sample a passage from the trained inference program.
#
#   scripts/kjv-data.sh -> data/kjv/train.txt (3.96 MB), data/kjv/val.txt (0.44 MB), raw bytes
#   specs/gpt_char.cannl (4 blocks, width 128, ctx 128, 0.85 M params)
#     -> cannl gen -> plain C -> CMake/Ninja -> build/release/gpt_char_train, gpt_char_infer
#     -> trains STEPS steps (default 600) of 32 random windows on 2 threads (AdamW, lr 1e-3 with
#        a cosine decay), validating on 10 fixed batches of val.txt every 100 steps; prints the
#        validation loss (nats per byte)
#     -> gpt_char_infer --generate 300 --prompt "And God said" --temperature 0.8 --top-k 40
#        (on the model's KV cache: one single-position step per byte)
# Extra arguments go to the training program (e.g. --steps 2000, --threads 4).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --data
scripts/kjv-data.sh data/kjv
cmake --preset release >/dev/null
cmake --build --preset release --target gpt_char_train gpt_char_infer

out=build/release/lm
mkdir -p "$out"
echo "== generated C: build/release/cannl/gpt_char/ (the spec: specs/gpt_char.cannl)"
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
          "--seed 1" "--threads 2" "--log-every 50" "--checkpoint $out/gpt_char.safetensors" \
          "--metrics $out/gpt_char.jsonl"; do
  set_default "${kv%% *}" "${kv#* }"
done
build/release/gpt_char_train "${args[@]}" "$@"
end=$(date +%s.%N)
echo "== training wall time: $(awk "BEGIN { printf \"%.1f\", $end - $start }") s"
echo "== checkpoint: $out/gpt_char.safetensors   metrics: $out/gpt_char.jsonl"
echo "== sample (gpt_char_infer --generate 300 --prompt \"And God said\" --temperature 0.8 --top-k 40 --seed 1):"
build/release/gpt_char_infer --weights "$out/gpt_char.safetensors" --threads 2 \
  --generate 300 --prompt "And God said" --temperature 0.8 --top-k 40 --seed 1
echo
