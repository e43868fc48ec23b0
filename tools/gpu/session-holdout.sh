#!/usr/bin/env bash
# Held-out check of the LoRA allocation replay (fitted on tests/data/gpu/h200-knobs): two PEFT
# loops memplan's LoRA replay was not developed on (tools/gpu/holdout-cases.jsonl: Llama-3.2-1B in
# fp32 under bf16 autocast with r=64 on q/v; Qwen2.5-0.5B bf16, r=8 on all linears, 8 x 2048, under
# expandable segments), each a trace and a summary line. No build.
#   OUT=/tmp/out bash tools/gpu/session-holdout.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)'
timeout 100 python3 tools/gpu/record_trace.py --cases tools/gpu/holdout-cases.jsonl --case h-llama1b-amp-lora-qv-gc \
  --out "$OUT/trace-h-llama1b-amp-lora-qv-gc.json.gz" --summary "$OUT/holdout-loops.jsonl" 2>&1 | grep -v -i warn | tail -2
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 python3 tools/gpu/record_trace.py --cases tools/gpu/holdout-cases.jsonl \
  --case h-qwen05-bf16-lora-gc --out "$OUT/trace-h-qwen05-bf16-lora-gc-expandable_segments_True.json.gz" \
  --summary "$OUT/holdout-loops.jsonl" 2>&1 | grep -v -i warn | tail -2
echo done
