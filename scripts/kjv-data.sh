#!/usr/bin/env bash
# The King James Bible as a byte-level language-modelling data set (cannl's language-model demo).
# Decodes Debian's bible-kjv text with `bible` (4.4 MB of plain text, one verse per line, each
# starting with its reference: "Ge1:1 In the beginning God created ...") and splits it at the
# first line break after 90% of the bytes: the last 10% (the end of the New Testament) is the
# validation stream. Both files are raw bytes, read by the training program's --stream /
# --val-stream (one token per byte, vocabulary 256).
#   scripts/kjv-data.sh [OUT_DIR]      default data/kjv; writes OUT_DIR/train.txt and OUT_DIR/val.txt
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/kjv}
if ! command -v bible >/dev/null 2>&1; then
  echo "kjv-data.sh: the 'bible' command is missing: install the Debian packages bible-kjv and bible-kjv-text" \
       "(scripts/install-deps.sh --data does)" >&2
  exit 1
fi
mkdir -p "$out"
tmp=$(mktemp "$out/.kjv.XXXXXX")
trap 'rm -f "$tmp" "$tmp.train" "$tmp.val"' EXIT
bible -f 'gen1:1-rev22:21' > "$tmp"
size=$(stat -c %s "$tmp")
if [ "$size" -lt 4000000 ]; then
  echo "kjv-data.sh: 'bible' printed only $size bytes (expected about 4.4 MB)" >&2
  exit 1
fi
# The split: the byte after the first newline at or past 90% of the text.
split=$(( $(head -c $(( size * 9 / 10 )) "$tmp" | wc -c) ))
split=$(( split + $(tail -c +$(( split + 1 )) "$tmp" | { head -n 1; cat > /dev/null; } | wc -c) ))
head -c "$split" "$tmp" > "$tmp.train"
tail -c +$(( split + 1 )) "$tmp" > "$tmp.val"
mv "$tmp.train" "$out/train.txt"
mv "$tmp.val" "$out/val.txt"
echo "kjv-data.sh: $out/train.txt ($(stat -c %s "$out/train.txt") bytes), $out/val.txt ($(stat -c %s "$out/val.txt") bytes)"
