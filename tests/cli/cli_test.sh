#!/usr/bin/env bash
# CLI contract of `cannl`: exit statuses (0 ok, 1 bad spec, 2 bad usage), the exact output of
# `cannl check` for the contract's §1 example, --json, --dump, --version, and that a bad spec
# prints a diagnostic with file:line:col, the source line and a caret.
#   cli_test.sh CANNL SOURCE_DIR
set -u
cannl=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect_rc() {  # expect_rc WANT CMD...
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "'$*' exited $rc, expected $want"; cat "$tmp/err"; fi
}

# §1 example: exactly the contract's shapes.
expect_rc 0 "$cannl" check "$src/specs/fashion_mlp.cannl"
for line in 'w1 : [784 -> 512]' 'w2 : [512 -> 512]' 'w3 : [512 -> 10]' 'b3 : [10]' \
            'logits : [batch | 10]' 'loss : []' 'image : [batch | 784]' 'b1 : [512]'; do
  grep -qxF "$line" "$tmp/out" && ok || bad "fashion_mlp: missing line '$line'"
done
# Declaration order: inputs, params, computed.
order=$(cut -d' ' -f1 "$tmp/out" | tr '\n' ' ')
[ "$order" = "image label w1 w2 w3 b3 b1 b2 x h1 h2 logits loss accuracy " ] && ok || bad "order: $order"

# --json parses and carries kinds and axes.
expect_rc 0 "$cannl" check --json "$src/specs/fashion_mlp.cannl"
/usr/bin/python3 - "$tmp/out" <<'PY' && ok || bad "json content"
import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))}
assert t["w1"]["kind"] == "param" and t["w1"]["input"] == [784] and t["w1"]["output"] == [512]
assert t["logits"]["kind"] == "computed" and t["logits"]["batch"] == ["batch"]
assert t["image"]["kind"] == "input" and t["loss"]["output"] == [] and t["loss"]["batch"] == []
PY

# Contract v1 §1 (specs/gpt_tiny.cannl): exactly the contract's lines, integer
# inputs with ` int`, and a per-tensor dtype in the JSON.
expect_rc 0 "$cannl" check "$src/specs/gpt_tiny.cannl"
for line in 'wte : [128 -> 256]' 'x0 : [batch, 64 | 128]' 'qkv : [batch, 64 | 3, 4, 32]' \
            'y : [batch, 64 | 4, 32]' 'logits : [batch, 64 | 256]' 'loss : []' 'tokens : [batch, 64 | ] int'; do
  grep -qxF "$line" "$tmp/out" && ok || bad "gpt_tiny: missing line '$line'"
done
expect_rc 0 "$cannl" check --dump=shapes "$src/specs/gpt_tiny.cannl"
grep -qF '29:47 position(tokens) : [batch, 64 | ] int' "$tmp/out" && ok || bad "gpt_tiny --dump=shapes: int sub-expression"
expect_rc 0 "$cannl" check --json "$src/specs/gpt_tiny.cannl"
/usr/bin/python3 - "$tmp/out" <<'PY' && ok || bad "gpt_tiny json dtype"
import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))}
assert t["tokens"]["dtype"] == "int32" and t["next"]["dtype"] == "int32"
assert t["wte"]["dtype"] == "float" and t["logits"]["dtype"] == "float"
assert t["tokens"]["batch"] == ["batch", 64]
PY
# --dim NAME=VALUE (check and gen): replaces a dim; a bad NAME or VALUE is a usage error naming it.
expect_rc 0 "$cannl" check --dim ctx=16 --dim d=32 "$src/specs/gpt_tiny.cannl"
grep -qxF 'x0 : [batch, 16 | 32]' "$tmp/out" && ok || bad "--dim ctx=16 --dim d=32"
for arg in nope=3 ctx=0 ctx=-1 ctx=1.5 ctx= ctx 3=4; do
  expect_rc 2 "$cannl" check --dim "$arg" "$src/specs/gpt_tiny.cannl"
  grep -qF -- "--dim $arg" "$tmp/err" && ok || bad "--dim $arg: the error does not name it: $(cat "$tmp/err")"
done
expect_rc 2 "$cannl" check --dim ctx=8 --dim ctx=9 "$src/specs/gpt_tiny.cannl"
expect_rc 2 "$cannl" gen --dim vocab=0 "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/none"
expect_rc 2 "$cannl" gen --dim hiden=8 "$src/specs/fashion_mlp.cannl" -o "$tmp/gen/none"
grep -qF "the spec has no dim 'hiden' (its dims: hidden)" "$tmp/err" && ok || bad "gen --dim: unknown dim"
# --quantize int8: the C target in float32 with the generated kernel only; a card that lists the int8 bytes
for bad_q in "--quantize int4" "--quantize int8 --target cuda" "--quantize int8 --dtype f64" "--quantize int8 --blas"; do
  # shellcheck disable=SC2086
  expect_rc 2 "$cannl" gen $bad_q "$src/specs/fashion_mlp.cannl" -o "$tmp/q8none"
done
expect_rc 0 "$cannl" gen --quantize int8 "$src/specs/fashion_mlp.cannl" -o "$tmp/q8"
grep -q '"quantized"' "$tmp/q8/fashion_mlp.json" && grep -q 'cannl_sgemm_q8' "$tmp/q8/fashion_mlp_inference.c" \
  && ! grep -q 'cannl_sgemm_q8' "$tmp/q8/fashion_mlp.c" && ok || bad "--quantize int8: card and inference products"
expect_rc 0 "$cannl" gen --dim hidden=32 "$src/specs/fashion_mlp.cannl" --dump=shapes
grep -qF 'w1 : [784 -> 32]' "$tmp/out" && ok || bad "gen --dim hidden=32"
# gen on a language model (contract v1): the attention calls of the runtime, ids as int32_t.
expect_rc 0 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gpt"
grep -qF "cannl_attention_forward_f32(" "$tmp/gpt/gpt_tiny.c" && ok || bad "gen gpt_tiny: attention call"
grep -qF "const int32_t *const tokens = " "$tmp/gpt/gpt_tiny.c" && ok || bad "gen gpt_tiny: int32 ids"
python3 - "$tmp/gpt/gpt_tiny.json" <<'EOF' && ok || bad "gen gpt_tiny: the model card's input dtypes and id ranges"
import json, sys
c = json.load(open(sys.argv[1]))
ins = {i["name"]: i for i in c["inputs"]}
assert ins["tokens"]["dtype"] == "int32" and ins["tokens"]["ids"] == 256, ins["tokens"]
assert ins["next"]["dtype"] == "int32" and ins["next"]["ids"] == 256, ins["next"]
EOF
grep -qF '{"tokens", 1, { 64 }, 64, 256},' "$tmp/gpt/gpt_tiny.c" && ok || bad "gen gpt_tiny: cannl_tensor_info.ids"
# No T x T buffer (issue 16): at a fixed batch, the training arena of gpt_char grows linearly
# in ctx: arena(1024) - arena(512) <= 2.02 (arena(512) - arena(256)).
for c in 256 512 1024; do
  expect_rc 0 "$cannl" gen "$src/specs/gpt_char.cannl" --dim ctx=$c --max-batch 8 --stats --json
  cp "$tmp/out" "$tmp/arena_$c.json"
done
python3 - "$tmp" <<'EOF' && ok || bad "gpt_char's training arena is not linear in ctx"
import json, sys
a = {c: json.load(open(f"{sys.argv[1]}/arena_{c}.json"))["routines"]["train_step"]["after"]["arena_bytes"] for c in (256, 512, 1024)}
print("gpt_char train_step arena at ctx 256/512/1024, batch 8:", a[256], a[512], a[1024])
assert a[1024] - a[512] <= 2.02 * (a[512] - a[256]), a
EOF
# Layers as loops (issue 34): the generated C of a model with a repeat block does not grow with
# the depth. At 4N layers each file (the training unit, the forward-only unit, the training
# program and the header) is within 5% of its size at N (the instances' params, gradients and
# optimiser state have no fields of their own in either state; the runtime's tables and the
# forward-only state's param rows fold a block's rows into cannl_rt.h's repetition macros), and
# both units compile warning-free (the macros' expansion).
tiny_lm="--dim ctx=16 --dim d=32 --dim hd=8 --dim heads=4"
for l in 3 12; do
  expect_rc 0 "$cannl" gen "$src/specs/gpt_char.cannl" $tiny_lm --dim layers=$l -o "$tmp/depth_$l"
done
python3 - "$tmp" <<'EOF' && ok || bad "the generated C grows with the depth"
import os, sys
grown = []
for f in ("gpt_char.c", "gpt_char_inference.c", "gpt_char_train.c", "gpt_char.h"):
    s = {l: os.path.getsize(f"{sys.argv[1]}/depth_{l}/{f}") for l in (3, 12)}
    print(f"{f} at 3 and 12 layers:", s[3], s[12], "bytes")
    if abs(s[12] - s[3]) > 0.05 * s[3]:
        grown.append(f)
assert not grown, grown
EOF
for f in gpt_char.c gpt_char_inference.c; do
  grep -q 'CANNL_REP_' "$tmp/depth_12/$f" && ok || bad "$f: a repeat block's table rows are not folded"
  for cc in gcc clang; do
    command -v $cc > /dev/null || continue
    $cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I "$src/runtime-lib" "$tmp/depth_12/$f" \
      && ok || bad "$cc: the 12-layer $f"
  done
done

# A rolled repeat block's decode (issue 34): gpt_char's decode routine calls one <block>_decode
# in a loop over the instances, so its code (the functions, the decode routine's and the
# block function's lines) is the same at 2 and 8 layers.
for l in 2 8; do
  expect_rc 0 "$cannl" gen "$src/specs/gpt_char.cannl" --dim ctx=16 --dim d=32 --dim hd=8 --dim heads=4 \
    --dim layers=$l --max-batch 2 -o "$tmp/depth_$l"
done
python3 - "$tmp" <<'EOF' && ok || bad "gpt_char's decode code grows with the depth"
import re, sys
def parts(l):
    src = open(f"{sys.argv[1]}/depth_{l}/gpt_char_inference.c").read()
    body = lambda head: src[src.index(head):].split("\n}\n", 1)[0].count("\n")
    return {"functions": len(re.findall(r"^static \w+ \**\w+\(", src, re.M)),
            "block decode functions": len(re.findall(r"^static void \w+_decode\(", src, re.M)),
            "decode routine lines": body("/* routine decode */"),
            "block decode lines": body("static void layers_decode(")}
a, b = parts(2), parts(8)
print("gpt_char inference.c at 2 and 8 layers:", a, b)
assert a == b and a["block decode functions"] == 1, (a, b)
EOF

# Run-time-sized CUDA states (issue 36 item 7): the device arena is sized for the state's
# max_batch, as the C target's arena: the model card's bytes per example and the .cu's allocation
# agree, and gpt_char's CUDA state for 8 examples is far below its state for the spec's maximum.
expect_rc 0 "$cannl" gen "$src/specs/gpt_char.cannl" --target cuda -o "$tmp/cuda_sized"
python3 - "$tmp/cuda_sized" <<'EOF' && ok || bad "gpt_char's CUDA state is not sized per example"
import json, re, sys
d = sys.argv[1]
card = json.load(open(f"{d}/gpt_char.json"))
a, top = card["arena_bytes"], card["max_batch"]
full, per = a["training_state"], a["training_state_per_example"]
at8 = full - (top - 8) * per
print(f"gpt_char CUDA training state: {full} bytes at max_batch {top}, {at8} at 8 ({per} per example)")
cu = open(f"{d}/gpt_char.cu").read()
alloc = re.search(r"cannl_device_alloc\(\(size_t\)(\d+) \+ \(size_t\)(\d+) \* \(size_t\)max_batch", cu)
assert alloc and int(alloc.group(1)) + top * int(alloc.group(2)) == full and int(alloc.group(2)) == per, alloc
assert f"{full - top * per} bytes, then {per} per example of max_batch ({full} at {top})" in cu
assert re.search(r"n > m->max_batch", cu) and "api_create_batch_fn" in cu
assert per > 0 and at8 * 10 < full, (at8, full)
EOF

# A per-example tensor prints as [batch | ].
printf 'model m\ninput l : [10]\ninput t : [10]\nce = cross_entropy(l, t)\n' > "$tmp/ce.cannl"
expect_rc 0 "$cannl" check "$tmp/ce.cannl"
grep -qxF 'ce : [batch | ]' "$tmp/out" && ok || bad "per-example shape"

# Dumps.
for d in tokens ast shapes; do expect_rc 0 "$cannl" check --dump=$d "$src/specs/fashion_cnn.cannl"; done
grep -q "conv2d" "$tmp/out" && ok || bad "dump=shapes lists sub-expressions"

# Bad spec: exit 1, file:line:col, the line, a caret.
printf 'model m\ninput x : [3]\nh = W * x\n' > "$tmp/bad.cannl"
expect_rc 1 "$cannl" check "$tmp/bad.cannl"
grep -q "bad.cannl:3:5: error: unknown tensor 'W'" "$tmp/err" && ok || bad "diagnostic location"
grep -q "h = W \* x" "$tmp/err" && ok || bad "diagnostic source line"
grep -qE '^ +\| +\^$' "$tmp/err" && ok || bad "diagnostic caret"
[ ! -s "$tmp/out" ] && ok || bad "no partial output on error"

# Several independent errors are all reported.
printf 'model m\ninput x : [3]\na = Q + x\nb = relu(x, strid = 2)\nc = x $ x\n' > "$tmp/multi.cannl"
expect_rc 1 "$cannl" check "$tmp/multi.cannl"
[ "$(grep -c ': error:' "$tmp/err")" -eq 3 ] && ok || bad "three errors reported"

# Usage errors: exit 2.
expect_rc 2 "$cannl" check
expect_rc 2 "$cannl" check "$tmp/does-not-exist.cannl"
expect_rc 2 "$cannl" check "$tmp"
grep -q "is a directory" "$tmp/err" && ok || bad "a directory as SPEC"
expect_rc 2 "$cannl" check --dump=nonsense "$src/specs/fashion_mlp.cannl"
expect_rc 2 "$cannl" check --json --dump=tokens "$src/specs/fashion_mlp.cannl"
expect_rc 2 "$cannl" frobnicate
expect_rc 2 "$cannl"
expect_rc 0 "$cannl" --version
grep -qE '^cannl [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/out" && ok || bad "--version"
expect_rc 0 "$cannl" --help
expect_rc 0 "$cannl" check --help

# cannl gen: the files; nothing written for a bad spec; usage errors.
mkdir -p "$tmp/gen"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/moons"
[ "$(ls "$tmp/gen/moons" | tr '\n' ' ')" = "CMakeLists.txt moons_mlp.c moons_mlp.h moons_mlp.json moons_mlp_infer.c moons_mlp_inference.c moons_mlp_train.c " ] && ok || bad "gen files: $(ls "$tmp/gen/moons")"
grep -q '^#define MOONS_MLP_MAX_BATCH 256$' "$tmp/gen/moons/moons_mlp.h" && ok || bad "default max batch"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/moons" --dtype f64 --max-batch 8
grep -q '^typedef double moons_mlp_real;$' "$tmp/gen/moons/moons_mlp.h" && ok || bad "--dtype f64"
grep -q '^#define MOONS_MLP_MAX_BATCH 8$' "$tmp/gen/moons/moons_mlp.h" && ok || bad "--max-batch"
[ -z "$(ls "$tmp/gen" | grep -v '^moons$')" ] && ok || bad "temporary files left: $(ls "$tmp/gen")"
printf 'model broken\ninput x : [3]\nparam w\nloss = mean(w * x + q)\nminimize loss with sgd(lr = 1)\n' > "$tmp/broken.cannl"
expect_rc 1 "$cannl" gen "$tmp/broken.cannl" -o "$tmp/gen/broken"
[ ! -e "$tmp/gen/broken" ] && ok || bad "a bad spec left an output directory"
grep -q 'broken.cannl:4:' "$tmp/err" && ok || bad "gen diagnostic location"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/x" --dtype f16
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/x" --max-batch 0
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/new/parents/moons"
[ -f "$tmp/new/parents/moons/moons_mlp.c" ] && ok || bad "gen -o creates missing parents"
# A contraction too large to generate: an error with its line, nothing written.
printf 'model big\nparam x : [1000000000]\nparam z : [1000000000]\ny = einsum("i;j => ", x, z)\nloss = y *. y\nminimize loss with sgd(lr = 0.1)\n' > "$tmp/big.cannl"
expect_rc 1 "$cannl" gen "$tmp/big.cannl" -o "$tmp/gen/big"
grep -q 'big.cannl:4: error: a loop nest' "$tmp/err" && [ ! -e "$tmp/gen/big" ] && ok || bad "too large a nest"
# An output without a batch axis (a param, a scalar): an error at its name in 'output'.
printf 'model o\ninput x : [3]\nparam b : [3]\ny = x + b\nloss = sum(y)\noutput y, b\nminimize loss with sgd(lr = 0.1)\n' > "$tmp/o.cannl"
expect_rc 1 "$cannl" gen "$tmp/o.cannl" -o "$tmp/gen/o"
grep -q "o.cannl:6:11: error: output 'b' : \[3\] has no batch axis" "$tmp/err" && [ ! -e "$tmp/gen/o" ] && ok || bad "output without a batch axis"
# Regenerating into the same directory for another target leaves none of the old files.
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/switch"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/switch" --target cuda
[ "$(ls "$tmp/gen/switch" | tr '\n' ' ')" = "CMakeLists.txt moons_mlp.cu moons_mlp.h moons_mlp.json moons_mlp_infer.cu moons_mlp_train.cu " ] && ok || bad "stale files after a target switch: $(ls "$tmp/gen/switch")"
# A path option followed by another option lacks its value: not a directory named '--stats'.
mkdir -p "$tmp/cwd"
cd "$tmp/cwd"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -o --stats
grep -qF -- "--output: expected a path, found the option '--stats'" "$tmp/err" && ok || bad "gen -o --stats: $(cat "$tmp/err")"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" --weights --embed -o x
expect_rc 2 "$cannl" plot "$src/specs/moons_mlp.cannl" -o --title
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -o ""
grep -qF -- "--output: expected a path, got an empty one" "$tmp/err" && ok || bad "gen -o '': $(cat "$tmp/err")"
cd - >/dev/null
[ -z "$(ls -A "$tmp/cwd")" ] && ok || bad "options taken as paths wrote: $(ls -A "$tmp/cwd")"
# A file of the user's where gen writes one of its own (a project's CMakeLists.txt) is an
# error, and nothing is written; cannl's own files are replaced, and only they are removed.
mkdir -p "$tmp/gen/mine"
echo 'project(mine)' > "$tmp/gen/mine/CMakeLists.txt"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/mine"
grep -qF "cannl: error: $tmp/gen/mine/CMakeLists.txt exists and was not written by cannl" "$tmp/err" && ok || bad "user's CMakeLists.txt: $(cat "$tmp/err")"
[ "$(cat "$tmp/gen/mine/CMakeLists.txt")" = "project(mine)" ] && [ "$(ls "$tmp/gen/mine")" = "CMakeLists.txt" ] \
  && ok || bad "user's CMakeLists.txt replaced or files written: $(ls "$tmp/gen/mine")"
rm "$tmp/gen/mine/CMakeLists.txt"
echo '/* my own */' > "$tmp/gen/mine/moons_mlp.cu"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/mine"
[ "$(cat "$tmp/gen/mine/moons_mlp.cu")" = "/* my own */" ] && ok || bad "gen removed the user's moons_mlp.cu"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/mine" --dtype f64  # its own files: replaced
# A killed `cannl gen` leaves its temporaries (DIR.cannl-tmp-<pid>/, DIR/<file>.cannl-tmp-<pid>);
# the next run into DIR removes those of processes that no longer run, and only those: only
# files whose first line is cannl's marker (its own), never a directory recursively.
dead=$(sh -c 'echo $$')
marker='// Written by cannl gen.'
mkdir -p "$tmp/gen/stale/x" "$tmp/gen/stale/x.cannl-tmp-$dead" "$tmp/gen/stale/x.cannl-tmp-$$"
for f in "$tmp/gen/stale/x/moons_mlp.c.cannl-tmp-$dead" "$tmp/gen/stale/x/moons_mlp.h.cannl-tmp-$$" \
         "$tmp/gen/stale/x.cannl-tmp-$dead/moons_mlp.c"; do
  printf '%s\n/* half of it' "$marker" > "$f"
done
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/stale/x"
[ ! -e "$tmp/gen/stale/x.cannl-tmp-$dead" ] && [ ! -e "$tmp/gen/stale/x/moons_mlp.c.cannl-tmp-$dead" ] \
  && [ -d "$tmp/gen/stale/x.cannl-tmp-$$" ] && [ -e "$tmp/gen/stale/x/moons_mlp.h.cannl-tmp-$$" ] && [ -e "$tmp/gen/stale/x/moons_mlp.c" ] \
  && ok || bad "stale temporaries: $(ls -a "$tmp/gen/stale" "$tmp/gen/stale/x" | tr '\n' ' ')"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/stale/y"  # a new directory: the same
mkdir -p "$tmp/gen/stale/z.cannl-tmp-$dead"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/stale/z"
[ ! -e "$tmp/gen/stale/z.cannl-tmp-$dead" ] && [ -e "$tmp/gen/stale/z/moons_mlp.c" ] && ok || bad "stale temporary beside a new directory"
# What does not carry the marker stays (issue 36): a user's file in a stale-looking directory
# (which then stays too, its cannl files gone), another file of a temporary's name, an empty one.
mkdir -p "$tmp/gen/stale/w.cannl-tmp-$dead/sub"
echo 'my notes' > "$tmp/gen/stale/w.cannl-tmp-$dead/notes.txt"
printf '%s\n' "$marker" > "$tmp/gen/stale/w.cannl-tmp-$dead/moons_mlp.c"
printf 'int main(void) { return 0; }\n' > "$tmp/gen/stale/x/main.c.cannl-tmp-$dead"
: > "$tmp/gen/stale/x/moons_mlp.c.cannl-tmp-$dead"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/stale/w"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/stale/x"
[ "$(cat "$tmp/gen/stale/w.cannl-tmp-$dead/notes.txt" 2>/dev/null)" = "my notes" ] && [ -d "$tmp/gen/stale/w.cannl-tmp-$dead/sub" ] \
  && [ ! -e "$tmp/gen/stale/w.cannl-tmp-$dead/moons_mlp.c" ] && [ -e "$tmp/gen/stale/x/main.c.cannl-tmp-$dead" ] \
  && [ -e "$tmp/gen/stale/x/moons_mlp.c.cannl-tmp-$dead" ] && ok \
  || bad "stale clean-up removed what cannl did not write: $(ls -a "$tmp/gen/stale" "$tmp/gen/stale/x" | tr '\n' ' ')"
if [ "$(id -u)" = 0 ]; then  # another user's file of a temporary's name, with the marker: kept
  printf '%s\n' "$marker" > "$tmp/gen/stale/x/moons_mlp.h.cannl-tmp-$dead"
  chown 4242:4242 "$tmp/gen/stale/x/moons_mlp.h.cannl-tmp-$dead"
  expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/stale/x"
  [ -e "$tmp/gen/stale/x/moons_mlp.h.cannl-tmp-$dead" ] && ok || bad "stale clean-up removed another user's file"
fi
# gen replaces a file only when its first line is exactly the marker: not one that merely
# mentions cannl near its top, nor a FIFO (reading it hung), a device, a directory, a symbolic
# link or another user's file; a temporary's name planted as a link makes the write fail, it
# never redirects it. Files of cannl 0.1.0 (before the marker) are recognised by their header.
"$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/own" >/dev/null 2>&1
[ "$(head -1 "$tmp/gen/own/moons_mlp.c")" = "$marker" ] && [ "$(head -1 "$tmp/gen/own/CMakeLists.txt")" = '# Written by cannl gen.' ] \
  && [ "$(head -1 "$tmp/gen/own/moons_mlp.json")" = '{' ] && ok || bad "gen's first lines: $(head -qn1 "$tmp/gen/own/"* | tr '\n' ' ')"
printf 'project(mine)\n# started from a file generated by cannl 0.1.0; do not edit.\n' > "$tmp/gen/own/CMakeLists.txt"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/own"
grep -qF "CMakeLists.txt exists and was not written by cannl (its first line is not '# Written by cannl gen.')" "$tmp/err" \
  && [ "$(head -1 "$tmp/gen/own/CMakeLists.txt")" = "project(mine)" ] && ok || bad "a user's CMakeLists.txt mentioning cannl: $(cat "$tmp/err")"
rm "$tmp/gen/own/CMakeLists.txt"
special() {  # special WHAT NEEDLE: gen refuses the moons_mlp.c just made WHAT, and leaves it
  local what=$1 needle=$2
  timeout 60 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/own" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = 2 ] && grep -qF "cannot write $tmp/gen/own/moons_mlp.c: it $needle" "$tmp/err" && ok \
    || bad "gen over a $what: exit $rc: $(cat "$tmp/err")"
}
rm "$tmp/gen/own/moons_mlp.c" && mkfifo "$tmp/gen/own/moons_mlp.c"
special FIFO "is a FIFO"
[ -p "$tmp/gen/own/moons_mlp.c" ] && ok || bad "gen replaced a FIFO"
rm "$tmp/gen/own/moons_mlp.c" && mkdir "$tmp/gen/own/moons_mlp.c"
special directory "is a directory"
rmdir "$tmp/gen/own/moons_mlp.c"
printf '%s\nint keep;\n' "$marker" > "$tmp/gen/victim.c"
ln -s ../victim.c "$tmp/gen/own/moons_mlp.c"
special link "is a symbolic link"
[ -L "$tmp/gen/own/moons_mlp.c" ] && [ "$(tail -1 "$tmp/gen/victim.c")" = "int keep;" ] && ok || bad "gen replaced a link or wrote its target"
rm "$tmp/gen/own/moons_mlp.c"
if [ "$(id -u)" = 0 ]; then
  mknod "$tmp/gen/own/moons_mlp.c" c 1 3  # a /dev/null of our own
  special device "is a device"
  [ -c "$tmp/gen/own/moons_mlp.c" ] && ok || bad "gen replaced a device"
  rm "$tmp/gen/own/moons_mlp.c"
  printf '%s\n' "$marker" > "$tmp/gen/own/moons_mlp.c" && chown 4242:4242 "$tmp/gen/own/moons_mlp.c"
  special "file of another user's" "belongs to another user"
  rm "$tmp/gen/own/moons_mlp.c"
fi
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/own"
sh -c 'ln -s "$1" "$2/moons_mlp.h.cannl-tmp-$$"; exec "$3" gen "$4" -o "$2"' sh "$tmp/gen/victim.c" "$tmp/gen/own" \
  "$cannl" "$src/specs/moons_mlp.cannl" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] && grep -qF "cannot create $tmp/gen/own/moons_mlp.h.cannl-tmp-" "$tmp/err" && [ "$(tail -1 "$tmp/gen/victim.c")" = "int keep;" ] \
  && ok || bad "a planted temporary link: exit $rc, $(cat "$tmp/err"), victim: $(tail -1 "$tmp/gen/victim.c")"
find "$tmp/gen/own" -name '*.cannl-tmp-*' -type l -delete
mkdir -p "$tmp/gen/legacy"
printf '/* moons_mlp.c — model `moons_mlp`: its kernels.\n * Generated by cannl 0.1.0 from moons_mlp.cannl; do not edit (regenerate instead).\n' \
  > "$tmp/gen/legacy/moons_mlp.c"
printf '/* moons_mlp.cu — model `moons_mlp` on one NVIDIA GPU: its kernels, its routines and its C API\n * (moons_mlp.h).\n * Generated by cannl 0.1.0 from moons_mlp.cannl; do not edit (regenerate instead).\n' \
  > "$tmp/gen/legacy/moons_mlp.cu"
printf '# Model `moons_mlp`, generated by cannl 0.1.0 from moons_mlp.cannl; do not edit.\n' > "$tmp/gen/legacy/CMakeLists.txt"
expect_rc 0 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/gen/legacy"
[ "$(head -1 "$tmp/gen/legacy/moons_mlp.c")" = "$marker" ] && [ ! -e "$tmp/gen/legacy/moons_mlp.cu" ] && ok \
  || bad "files of cannl 0.1.0 not replaced: $(ls "$tmp/gen/legacy")"
# --target cuda writes a model card too, from the same memory layout: its device arena (the
# training state, the optimiser state in it) is no larger than the C target's training state
# (its arena and its optimiser-state block).
expect_rc 0 "$cannl" gen "$src/specs/fashion_cnn.cannl" -o "$tmp/gen/cnn_c"
expect_rc 0 "$cannl" gen "$src/specs/fashion_cnn.cannl" -o "$tmp/gen/cnn_cuda" --target cuda
python3 - "$tmp/gen/cnn_c/fashion_cnn.json" "$tmp/gen/cnn_cuda/fashion_cnn.json" <<'PY' && ok || bad "CUDA model card: training_state"
import json, sys
c, g = (json.load(open(f)) for f in sys.argv[1:3])
# Issue 14's check as written: the CUDA card's training_state at most the C card's. The C
# state's optimiser state is an allocation of its own (ZeRO-1); its training_state counts it.
c_state = c["arena_bytes"]["training_state"]
assert "opt_state_block" not in g and c["opt_state_block"]["bytes"] > 0
assert 0 < g["arena_bytes"]["training_state"] <= c_state, (g["arena_bytes"], c_state)
assert g["arena_bytes"]["inference_state"] is None and c["arena_bytes"]["inference_state"] > 0
assert g["params"] == c["params"] and g["routines"] == c["routines"]
PY
# (the arena sized for the state's max_batch: the card's bytes at the spec's maximum, and per example)
grep -qF "char *dev;        /* the device arena" "$tmp/gen/cnn_cuda/fashion_cnn.cu" \
  && grep -qF "cannl_device_alloc($(python3 -c "import json; a = json.load(open('$tmp/gen/cnn_cuda/fashion_cnn.json'))
print(f\"(size_t){a['arena_bytes']['training_state'] - a['max_batch'] * a['arena_bytes']['training_state_per_example']} + \"
      f\"(size_t){a['arena_bytes']['training_state_per_example']} * (size_t)max_batch\")")," \
    "$tmp/gen/cnn_cuda/fashion_cnn.cu" \
  && ok || bad "the CUDA source allocates the card's arena"
# --precision (issue 18): the CUDA products' arithmetic, written in the source and the card;
# only with --dtype f32 (tf32 only with --target cuda), any other combination a usage error, nothing written.
for p in fp32 tf32 bf16; do
  expect_rc 0 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_$p" --target cuda --precision $p
  [ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['precision'])" "$tmp/gen/prec_$p/gpt_tiny.json")" = $p ] \
    && ok || bad "--precision $p: the model card's precision"
done
grep -q 'CUBLAS_COMPUTE_32F,' "$tmp/gen/prec_fp32/gpt_tiny.cu" && grep -q 'CUBLAS_COMPUTE_32F_FAST_TF32,' "$tmp/gen/prec_tf32/gpt_tiny.cu" \
  && grep -q 'CUBLAS_COMPUTE_32F_FAST_16BF,' "$tmp/gen/prec_bf16/gpt_tiny.cu" && ok || bad "--precision: the products' compute type"
expect_rc 0 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_default" --target cuda
cmp -s "$tmp/gen/prec_default/gpt_tiny.cu" "$tmp/gen/prec_fp32/gpt_tiny.cu" && ok || bad "--precision fp32 is the default"
# The C target (issue 38): bf16 asks the runtime for its bf16 products (fp32 where the CPU lacks
# them, said on stderr), in the card; fp32 is the default's output; tf32 and --blas refused.
expect_rc 0 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_c_bf16" --precision bf16
[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('precision'))" "$tmp/gen/prec_c_bf16/gpt_tiny.json")" = bf16 ] \
  && grep -q 'cannl_gemm_set_precision(m->gemm, CANNL_PRECISION_BF16)' "$tmp/gen/prec_c_bf16/gpt_tiny.c" \
  && ok || bad "--target c --precision bf16: the card and the runtime's bf16 products"
expect_rc 0 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_c_fp32" --precision fp32
expect_rc 0 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_c_default"
cmp -s "$tmp/gen/prec_c_default/gpt_tiny.c" "$tmp/gen/prec_c_fp32/gpt_tiny.c" \
  && cmp -s "$tmp/gen/prec_c_default/gpt_tiny.json" "$tmp/gen/prec_c_fp32/gpt_tiny.json" \
  && ! grep -q 'cannl_gemm_set_precision' "$tmp/gen/prec_c_fp32/gpt_tiny.c" && ok || bad "--target c --precision fp32 is the default"
expect_rc 2 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_c" --precision tf32
grep -q -- '--precision: tf32 only with --target cuda' "$tmp/err" && [ ! -e "$tmp/gen/prec_c" ] && ok || bad "--precision tf32 with --target c"
expect_rc 2 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_c" --precision bf16 --blas
grep -q -- '--precision: bf16 not with --blas' "$tmp/err" && [ ! -e "$tmp/gen/prec_c" ] && ok || bad "--precision bf16 with --blas"
expect_rc 2 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_f64" --target cuda --dtype f64 --precision tf32
grep -q -- '--precision: needs --dtype f32' "$tmp/err" && [ ! -e "$tmp/gen/prec_f64" ] && ok || bad "--precision with --dtype f64"
expect_rc 2 "$cannl" gen "$src/specs/gpt_tiny.cannl" -o "$tmp/gen/prec_x" --target cuda --precision fp16
[ ! -e "$tmp/gen/prec_x" ] && ok || bad "--precision fp16 left a directory"
# --stats --target: the target's view (nests, products, layout), the card's training state.
expect_rc 0 "$cannl" gen "$src/specs/fashion_cnn.cannl" --stats --target cuda
grep -q '^  --target cuda: train_step runs [0-9]* kernels, [1-9][0-9]* cuBLAS products' "$tmp/out" \
  && grep -q "^  --target cuda: training state $(python3 -c "import json; print(json.load(open('$tmp/gen/cnn_cuda/fashion_cnn.json'))['arena_bytes']['training_state'])") bytes, one device arena" "$tmp/out" \
  && ok || bad "--stats --target cuda: $(tail -2 "$tmp/out")"
expect_rc 0 "$cannl" gen "$src/specs/fashion_cnn.cannl" --stats --json
python3 - "$tmp/out" "$tmp/gen/cnn_c/fashion_cnn.json" <<'PY' && ok || bad "--stats --json: target"
import json, sys
s, card = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t = s["target"]
assert t["name"] == "c" and t["train_step"]["products"] > 0, t
assert t["training_state_bytes"] == card["arena_bytes"]["training_state"], (t, card["arena_bytes"])
assert t["inference_state_bytes"] == card["arena_bytes"]["inference_state"], (t, card["arena_bytes"])
assert t["opt_state_block_bytes"] == card["opt_state_block"]["bytes"], t
PY
# A file-size limit while writing: one error line naming the file, no directory left.
( ulimit -f 30; "$cannl" gen "$src/specs/fashion_mlp.cannl" -o "$tmp/gen/limited" >"$tmp/out" 2>"$tmp/err" ); rc=$?
[ "$rc" -eq 2 ] && grep -q "cannot write .*limited/fashion_mlp.*: File too large" "$tmp/err" && [ ! -e "$tmp/gen/limited" ] \
  && [ -z "$(ls "$tmp/gen" | grep cannl-tmp)" ] && ok || bad "gen past ulimit -f: rc $rc, $(cat "$tmp/err")"
touch "$tmp/afile"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -o "$tmp/afile/sub/dir"
grep -q "afile" "$tmp/err" && ok || bad "gen names the unwritable path"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" -O0 --dump=ir
grep -qF 'h1_mm[b, o] += w1[o, k] * x[b, k]' "$tmp/out" && ok || bad "--dump=ir"
grep -qF 'w1_grad[o, k] += h1_mm_grad[b, o] * x[b, k]' "$tmp/out" && ok || bad "--dump=ir backward"

# Passes (issue 4): the list, levels, --disable-pass, dumps after a pass, stats.
expect_rc 0 "$cannl" gen --passes
[ "$(awk 'NR > 1 {print $1}' "$tmp/out" | tr '\n' ' ')" = "loop_order simplify fold_fills reuse_values inline_virtual order_sums fuse hoist_divisions dce hoist_constants plan_blocks decode plan_memory mark_contractions plan_layout " ] \
  && ok || bad "--passes order"
# Every stage of the pipeline dumps: lowering, routine assembly, autodiff, the optimiser.
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:lower
head -1 "$tmp/out" | grep -q '^# fashion_mlp: the loop IR after stage lower' && grep -qF 'h1_mm[b, o] += w1[o, k] * x[b, k]' "$tmp/out" \
  && ! grep -q '_grad' "$tmp/out" && ok || bad "--dump=ir:lower"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:routines
grep -qx 'routine eval_metrics' "$tmp/out" && ! grep -q '_grad' "$tmp/out" && ok || bad "--dump=ir:routines"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:autodiff
grep -qF 'w1_grad[' "$tmp/out" && ! grep -q 'momentum' "$tmp/out" && ok || bad "--dump=ir:autodiff"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:optimizer
grep -qF 'w1_momentum_buffer[' "$tmp/out" && ok || bad "--dump=ir:optimizer"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" -O0 --dump=ir:loop_order
grep -qF 'for parallel b < n, o < 512, k < 784:  h1_mm[b, o] += w1[o, k] * x[b, k]' "$tmp/out" && ok || bad "--dump=ir:loop_order at -O0"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir
grep -qF 'h1_mm[b, o] = 0 += w1[o, k] * x[b, k]' "$tmp/out" && ok || bad "-O2: fill folded"
grep -qF 'x[b, o] = image[b, o] * (1/255)' "$tmp/out" && ok || bad "-O2: x = image / 255 is one multiply (in double)"
# The memory plan is visible: --dump=ir:plan_memory differs from the IR before it by the
# routines' work regions and offsets, and -O0 prints none.
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:dce
cp "$tmp/out" "$tmp/dce"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:plan_memory
! cmp -s "$tmp/dce" "$tmp/out" && ok || bad "--dump=ir:plan_memory is the same as --dump=ir:dce"
! grep -q 'work region' "$tmp/dce" && ok || bad "--dump=ir:dce shows a work region"
grep -A1 -x 'routine train_step' "$tmp/out" | grep -qE '^  work region: [0-9]+ bytes \(batch <= 256\)$' \
  && ok || bad "--dump=ir:plan_memory: train_step's work region"
grep -qE '^    @ \+[0-9]+ +([a-z0-9_]+, )*h1_mm(, |$)' "$tmp/out" && ok || bad "--dump=ir:plan_memory: h1_mm's offset"
grep -qE '^    @ \+[1-9][0-9]* +[a-z]' "$tmp/out" && ok || bad "--dump=ir:plan_memory: offsets past 0"
# Each dump names its stage in a first comment line.
head -1 "$tmp/out" | grep -q '^# fashion_mlp: the loop IR after pass plan_memory (-O2; passes run: .*plan_memory)$' \
  && ok || bad "--dump=ir:plan_memory header: $(head -1 "$tmp/out")"
# Without the plan's lines the plan_memory dump is the dce dump: the pass only places buffers.
grep -vE '^  work region: |^    @ \+|^# ' "$tmp/out" | cmp -s - <(grep -v '^# ' "$tmp/dce") && ok || bad "plan_memory dump: only plan lines added"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" -O0 --dump=ir
! grep -q 'work region' "$tmp/out" && ok || bad "-O0 --dump=ir shows a work region"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:simplify
grep -qF 'x[b, o] = image[b, o] * (1/255)' "$tmp/out" && ok || bad "--dump=ir:simplify"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir --disable-pass=inline_virtual
grep -qF 'x[b, o] = image[b, o] * (1/255)' "$tmp/out" && ok || bad "--disable-pass keeps x"
expect_rc 2 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir --disable-pass=nonsense
grep -q '^cannl: error: --disable-pass' "$tmp/err" && [ "$(wc -l < "$tmp/err")" -eq 1 ] && ok || bad "bad pass: one line"
# Options before the SPEC: --disable-pass takes one NAME (or NAME,NAME), never the SPEC.
expect_rc 0 "$cannl" gen --disable-pass=fuse --disable-pass dce "$src/specs/moons_mlp.cannl" --stats --json
! grep -q '"dce"' "$tmp/out" && grep -q '"plan_memory"' "$tmp/out" && ok || bad "--disable-pass before SPEC"
expect_rc 0 "$cannl" gen --disable-pass=fuse,dce -O1 -O2 "$src/specs/moons_mlp.cannl" --stats --json
grep -q '"level": 2' "$tmp/out" && ! grep -q '"dce"' "$tmp/out" && ok || bad "NAME,NAME and the last -O"
expect_rc 2 "$cannl" gen "$src/specs/moons_mlp.cannl" -O3 -o "$tmp/gen/o3"
grep -q '^cannl: error: -O' "$tmp/err" && [ "$(wc -l < "$tmp/err")" -eq 1 ] && ok || bad "bad -O: one line"
expect_rc 2 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=ir:nonsense
expect_rc 2 "$cannl" gen "$src/specs/fashion_mlp.cannl" -O1 --dump=ir:fuse
expect_rc 2 "$cannl" gen "$src/specs/fashion_mlp.cannl" -O3 --dump=ir
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=dot
grep -qF '"logits" [shape=ellipse, style=dashed' "$tmp/out" && ok || bad "--dump=dot virtual node"
grep -qF '"h1_mm_grad" -> "w1_grad";' "$tmp/out" && ok || bad "--dump=dot backward edge"
for c in forward backward update; do
  grep -qF "subgraph cluster_$c {" "$tmp/out" && ok || bad "--dump=dot: cluster $c"
done
sed -n '/subgraph cluster_update {/,/^  }/p' "$tmp/out" | grep -qF '"w1_momentum_buffer"' && ok || bad "--dump=dot: update cluster"
sed -n '/subgraph cluster_backward {/,/^  }/p' "$tmp/out" | grep -qF '"w1_grad"' && ok || bad "--dump=dot: backward cluster"
# --dump=dot:ROUTINE: one routine's nests (kernel names, spec lines) and buffers (shapes).
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=dot:forward
grep -qF '[label="matmul: sum_h1_mm\nline 14: h1 = relu(w1 * x + b1)", shape=box' "$tmp/out" && ok || bad "dot:forward: op node"
grep -qF '[label="h1\n[batch | 512]", shape=ellipse]' "$tmp/out" && ok || bad "dot:forward: shape on a buffer node"
grep -qF '[label="w1\n[784 -> 512]"' "$tmp/out" && ok || bad "dot:forward: param node"
! grep -q 'cluster\|_grad' "$tmp/out" && ok || bad "dot:forward: only the forward routine"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=dot:train_step
grep -qF '[label="w1_grad\n[784 -> 512]"' "$tmp/out" && ok || bad "dot:train_step: a gradient's shape"
for c in forward backward update; do
  grep -qF "subgraph cluster_$c {" "$tmp/out" && ok || bad "dot:train_step: cluster $c"
done
sed -n '/subgraph cluster_update {/,/^  }/p' "$tmp/out" | grep -qF 'sgd update of w1' && ok || bad "dot:train_step: update nest"
if command -v dot > /dev/null; then
  dot -Tsvg "$tmp/out" -o "$tmp/g.svg" && grep -q '<svg' "$tmp/g.svg" && ok || bad "dot:train_step renders"
fi
expect_rc 2 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=dot:backward
grep -qF "cannl: error: --dump=dot:backward: the program has no routine 'backward' (it has init, train_step, forward, eval_metrics, train_grads, train_update)" "$tmp/err" \
  && ok || bad "dot:ROUTINE: unknown routine"
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --max-batch 128 --stats --json
for k in arena_bytes loop_nests flops bytes_moved; do
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['train_step']['$k'] > 0" "$tmp/out" \
    && ok || bad "--stats --json: train_step.$k"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['$k'] == j['train_step']['$k']" "$tmp/out" \
    && ok || bad "--stats --json: $k at the top level"
done
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --stats
grep -q '^  train_step' "$tmp/out" && ok || bad "--stats"
expect_rc 2 "$cannl" gen "$src/specs/fashion_mlp.cannl" --json
expect_rc 0 "$cannl" gen "$src/specs/fashion_mlp.cannl" --dump=graph
grep -qF 'line 14: h1 = relu(w1 * x + b1)' "$tmp/out" && ok || bad "--dump=graph"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
