#!/usr/bin/env bash
# One GPU session's measurements for memplan (issues 22 and 28), run from the repository root on
# a machine with an NVIDIA GPU, PyTorch (its LibTorch), transformers, g++, cmake and ninja, and
# no package registry. What it needs from Debian 12 (fmt, yaml-cpp, CLI11, nlohmann-json, toml++,
# curl's header) comes as .deb files in .deps/gpu-debs (`apt-get download` them on a Debian
# 12 machine). Results go to $OUT (default ./gpu-out): results.tgz (every JSON and log) and log.txt.
#
#   OUT=/tmp/out [SET=loops|qknorm] tools/gpu/session.sh [CASES.jsonl]
#
# SET=loops (default) runs everything below; SET=qknorm skips the Python probes and measures the
# data set's q/k-norm models (Qwen3, Gemma-3, OLMo-2) instead of the loop cases.
#
# 1. builds memplan and memplan-measure against that PyTorch's LibTorch with the CUDA probes,
#    first exactly as a user with a pip LibTorch would (no include-order tricks), then, only if
#    that fails, with the Debian headers ahead of LibTorch's bundled fmt;
# 2. meanwhile, on the GPU: tools/gpu/context_probe.py (memory outside the allocator, step by
#    step) and tools/gpu/record_trace.py (allocator event histories under allocator settings);
# 3. `memplan measure --json` on the data set's loop cases that the harness builds, with both
#    allocator settings, accumulation and fused AdamW; `memplan calibrate --json`.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-out}"
CASES="${1:-tests/data/gpu/h200-loops.jsonl}"
SET="${SET:-loops}"
R="$OUT/r"
mkdir -p "$R"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

say "unpack Debian 12 headers and libraries"
P="$PWD/.deps/gpu-prefix"
rm -rf "$P" && mkdir -p "$P"
for d in .deps/gpu-debs/*.deb; do dpkg -x "$d" "$P"; done
export LD_LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TORCH_PREFIX="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'

say "GPU probes in the background while the build runs"
[ "$SET" = loops ] && (
  python3 tools/gpu/context_probe.py > "$R/context.json" 2> "$R/context.err"
  for conf in "expandable_segments:True" "max_split_size_mb:128" "roundup_power2_divisions:4" \
              "garbage_collection_threshold:0.6,max_split_size_mb:256"; do
    tag="$(echo "$conf" | tr ':,.' '___')"
    PYTORCH_CUDA_ALLOC_CONF="$conf" timeout 120 python3 tools/gpu/record_trace.py --cases "$CASES" --case l-gpt2-amp \
      --out "$R/trace-l-gpt2-amp-$tag.json.gz"
  done
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 tools/gpu/record_trace.py --cases "$CASES" \
    --case l-qwen05-amp-gc --out "$R/trace-l-qwen05-amp-gc-expandable_segments_True.json.gz"
) > "$R/python.log" 2>&1 &
PY=$!

build() {  # build DIR [extra CXX flags]
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_WITH_TORCH=ON -DMEMPLAN_PYTHON=OFF \
    -DMEMPLAN_TESTS=OFF -DMEMPLAN_BENCH=OFF -DCMAKE_PREFIX_PATH="$P/usr;$TORCH_PREFIX" \
    -DCMAKE_CXX_FLAGS="${2:-}" > "$R/configure-$(basename "$1").log" 2>&1 &&
    grep -h "memplan:" "$R/configure-$(basename "$1").log"
  cmake --build "$1" -j 16 --target memplan memplan-measure > "$R/build-$(basename "$1").log" 2>&1
}
say "build (as a user would)"
B=build-gpu
if build $B; then say "built: $(grep -c 'Building CXX' "$R/build-$B.log") objects"
else
  say "FAILED as a user would; retrying with the Debian headers first"; tail -30 "$R/build-$B.log"
  B=build-gpu-i
  build $B "-I$P/usr/include -I$P/usr/include/x86_64-linux-gnu" || { tail -30 "$R/build-$B.log"; B=""; }
fi
[ "$SET" = loops ] && { wait $PY; say "python probes done"; tail -8 "$R/python.log"; }

if [ -n "$B" ]; then
  M="$B/memplan-measure"
  run() {  # run NAME [ENV=...] -- FLAGS...
    local name="$1"; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    say "measure $name"
    env "${envs[@]}" timeout 120 "$M" measure --device cuda "$@" --json > "$R/measure-$name.json" 2> "$R/measure-$name.err"
    echo "  exit $?: $(tail -1 "$R/measure-$name.err")"
  }
  if [ "$SET" = qknorm ]; then
    run qwen3-1.7b-bf16-gc -- --model qwen3-1.7b --micro-batch 4 --seq-len 2048 --precision bf16 --checkpointing full
    run qwen3-1.7b-bf16-gc-exp PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- --model qwen3-1.7b --micro-batch 4 \
      --seq-len 2048 --precision bf16 --checkpointing full
    run gemma3-1b-bf16-gc -- --model gemma-3-1b --micro-batch 4 --seq-len 4096 --precision bf16 --checkpointing full
    run olmo2-7b-bf16-gc-fused -- --model olmo-2-7b --micro-batch 1 --seq-len 2048 --precision bf16 --checkpointing full \
      --optimizer-impl fused
  fi
  for conf in default expandable_segments:True; do
    [ "$SET" = loops ] || break
    tag=$([ "$conf" = default ] && echo "" || echo "-exp")
    e=(); [ "$conf" = default ] || e=(PYTORCH_CUDA_ALLOC_CONF=$conf)
    run "qwen05-amp-gc$tag" "${e[@]}" -- --model qwen2.5-0.5b --micro-batch 4 --seq-len 1024 --precision amp-bf16 --checkpointing full
    run "llama1b-bf16-gc-16k$tag" "${e[@]}" -- --model llama-3.2-1b --micro-batch 1 --seq-len 16384 --precision bf16 --checkpointing full
  done
  [ "$SET" = loops ] && run llama1b-bf16 -- --model llama-3.2-1b --micro-batch 2 --seq-len 2048 --precision bf16
  [ "$SET" = loops ] && run llama1b-bf16-fused -- --model llama-3.2-1b --micro-batch 2 --seq-len 2048 --precision bf16 --optimizer-impl fused
  [ "$SET" = loops ] && run llama1b-bf16-accum4 -- --model llama-3.2-1b --micro-batch 2 --seq-len 2048 --precision bf16 --grad-accum 4
  [ "$SET" = loops ] && run smollm360-fp32 -- --model smollm2-360m --micro-batch 4 --seq-len 1024 --precision fp32
  [ "$SET" = loops ] && run llama1b-fp32-eager -- --model llama-3.2-1b --micro-batch 2 --seq-len 512 --precision fp32 --attention eager
  [ "$SET" = loops ] && run qwen15-sgdm-bf16 -- --model qwen2.5-1.5b --micro-batch 4 --seq-len 2048 --precision bf16 --optimizer sgd-momentum
  [ "$SET" = loops ] && run gpt2-amp-eager -- --model gpt2 --micro-batch 8 --seq-len 1024 --precision amp-bf16 --attention eager
  [ "$SET" = loops ] && run quickstart -- --config examples/quickstart.yaml
  say "calibrate"
  timeout 200 "$M" calibrate --device cuda --out "$R/calibration.yaml" --force --json > "$R/calibrate.json" 2> "$R/calibrate.err"
  echo "  exit $?: $(tail -2 "$R/calibrate.err")"
  say "calibrate, the table"
  timeout 100 "$M" calibrate --from "$R/calibrate.json" --out "$R/calibration-from.yaml" --force > "$R/calibrate.txt" 2>&1
  echo "  exit $?"; cat "$R/calibrate.txt"
fi
say "pack"
tar -C "$OUT" -czf "$OUT/results.tgz" r
say "done"
