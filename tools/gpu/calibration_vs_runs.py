#!/usr/bin/env python3
"""A calibration profile against independent runs: the device figure (peak reserved + outside the
allocator) that memplan's harness measured on the H200 for each case of
tests/data/gpu/h200-2026-11-26/measure-*.json, against `memplan estimate` with and without the
profile (the harness's optimizer loop: for-loop AdamW unless fused).

    python3 tools/gpu/calibration_vs_runs.py tests/data/gpu/h200-2026-11-26/calibration-fit.yaml
"""
import json, subprocess, glob, sys, statistics
flags = {
 'qwen05-amp-gc': '--model qwen2.5-0.5b --micro-batch 4 --seq-len 1024 --precision amp-bf16 --checkpointing full',
 'llama1b-bf16-gc-16k': '--model llama-3.2-1b --micro-batch 1 --seq-len 16384 --precision bf16 --checkpointing full',
 'llama1b-bf16': '--model llama-3.2-1b --micro-batch 2 --seq-len 2048 --precision bf16',
 'llama1b-bf16-fused': '--model llama-3.2-1b --micro-batch 2 --seq-len 2048 --precision bf16 --optimizer-impl fused',
 'llama1b-bf16-accum4': '--model llama-3.2-1b --micro-batch 2 --seq-len 2048 --precision bf16 --grad-accum 4',
 'llama1b-fp32-eager': '--model llama-3.2-1b --micro-batch 2 --seq-len 512 --precision fp32 --attention eager',
 'qwen15-sgdm-bf16': '--model qwen2.5-1.5b --micro-batch 4 --seq-len 2048 --precision bf16 --optimizer sgd-momentum',
 'gpt2-amp-eager': '--model gpt2 --micro-batch 8 --seq-len 1024 --precision amp-bf16 --attention eager',
 'qwen3-1.7b-bf16-gc': '--model qwen3-1.7b --micro-batch 4 --seq-len 2048 --precision bf16 --checkpointing full',
 'gemma3-1b-bf16-gc': '--model gemma-3-1b --micro-batch 4 --seq-len 4096 --precision bf16 --checkpointing full',
 'smollm360-fp32': '--model smollm2-360m --micro-batch 4 --seq-len 1024 --precision fp32',
}
cal = sys.argv[1]
rows=[]
for name, f in flags.items():
    d = json.load(open(f'tests/data/gpu/h200-2026-11-26/measure-{name}.json'))
    dev = [x for x in d['figures'] if x['name']=='device'][0]['measured_bytes']
    s = d['setup']
    base = f"build/memplan estimate {f} --gpu h200 --device cuda{'' if 'fused' in name else ' --optimizer-impl for-loop'} --json".split()
    # harness: for-loop AdamW unless fused (LibTorch optimizers), torch version as the harness
    out=[]
    for extra in ([], ['--calibration', cal]):
        j = json.loads(subprocess.run(base+extra, capture_output=True, text=True).stdout)
        out.append(j['per_gpu']['device_peak_bytes'])
    e0=(out[0]-dev)/dev; e1=(out[1]-dev)/dev
    rows.append((name,e0,e1)); print(f"{name:24} uncal {100*e0:+6.1f}%  cal {100*e1:+6.1f}%")
print('median |err|: uncal %.1f%%  cal %.1f%%' % (100*statistics.median(abs(r[1]) for r in rows), 100*statistics.median(abs(r[2]) for r in rows)))
