#!/usr/bin/env bash
# One GPU session (issues 23 and 27), run from the repository root on the lent machine (PyTorch,
# transformers, peft, g++, cmake, ninja; no package registry; .deps/gpu-debs carried as in
# session.sh). Results go to $OUT (default ./gpu-out): log.txt, and results.tgz with r/.
#
#   OUT=/tmp/out bash tools/gpu/session-knobs.sh
#
# 1. builds `memplan` (no LibTorch) in the background;
# 2. the knob loops (tools/gpu/knob-cases.jsonl through record_trace.py --summary): PEFT LoRA with
#    fp32 and 16-bit adapters, with and without full checkpointing; torchtitan's loss eager and
#    compiled (the knobs --adapter-dtype and --compile-loss), each a trace and a summary line;
# 3. `memplan watch --log` around a real HF Trainer run (tools/gpu/watch_train.py), with the same
#    setup's `memplan estimate --json` beside it and `watch --replay` of the log it wrote.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-out}"
R="$OUT/r"
mkdir -p "$R"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

P="$PWD/.deps/gpu-prefix"
rm -rf "$P" && mkdir -p "$P"
for d in .deps/gpu-debs/*.deb; do dpkg -x "$d" "$P"; done
export LD_LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "peft", peft.__version__)'

say "build memplan in the background"
( cmake -S . -B build-gpu-cli -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_WITH_TORCH=OFF -DMEMPLAN_PYTHON=OFF \
    -DMEMPLAN_TESTS=OFF -DMEMPLAN_BENCH=OFF -DCMAKE_PREFIX_PATH="$P/usr" > "$R/configure.log" 2>&1 &&
  cmake --build build-gpu-cli -j 12 --target memplan > "$R/build.log" 2>&1 ) &
BUILD=$!

for c in k-llama1b-bf16-lora-gc k-llama1b-bf16-lora-gc-bf16ad k-llama1b-bf16-lora k-qwen05-amp-lora-gc \
         k-llama1b-bf16-ce-own k-llama1b-bf16-ce-compiled; do
  say "loop $c"
  timeout 150 python3 tools/gpu/record_trace.py --cases tools/gpu/knob-cases.jsonl --case "$c" \
    --out "$R/trace-$c.json.gz" --summary "$R/knob-loops.jsonl" 2>&1 | grep -v -i warn | tail -3
done

wait $BUILD; say "build exit $?"; tail -3 "$R/build.log"
M=build-gpu-cli/memplan
if [ -x "$M" ]; then
  F=(--model qwen2.5-0.5b --micro-batch 8 --seq-len 1024 --grad-accum 2 --precision amp-bf16 --checkpointing full
     --framework hf-trainer --gpu h200 --transformers-version 5.17 --torch-version 2.11)
  "$M" estimate "${F[@]}" --json > "$R/watch-estimate.json" 2> "$R/watch-estimate.err"; echo "estimate exit $?"
  [ -s "$R/watch-estimate.err" ] && head -5 "$R/watch-estimate.err"
  say "watch the HF Trainer run"
  timeout 240 "$M" watch --interval 0.1 --log "$R/watch-qwen05.jsonl" "${F[@]}" -- \
    python3 tools/gpu/watch_train.py --steps "$R/watch-steps.jsonl" > "$R/watch.out" 2> "$R/watch.err"
  echo "watch exit $?"; grep -v '^\[' "$R/watch.err" | grep -v -i warn | tail -15
  "$M" watch --replay "$R/watch-qwen05.jsonl" > "$R/replay.out" 2>&1; echo "replay exit $?"; tail -4 "$R/replay.out"
fi
say "pack"
tar -C "$OUT" -czf "$OUT/results.tgz" r
say "done"
