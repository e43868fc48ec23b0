#!/usr/bin/env python3
"""Record PyTorch's CUDA caching-allocator event history for one loop case of
shared/gpu/h200-loops.jsonl (or tests/data/gpu), in the format of its traces/: `events` as
[action, addr, size, stream], `segments` at the end, `stats` peaks, plus the allocator settings.

The loop is the data set's: an HF model built from the case's config with random weights, three
steps of `loss = model(input_ids=ids, labels=ids).loss; loss.backward(); opt.step();
opt.zero_grad(set_to_none=True)` with torch.optim.AdamW (foreach on CUDA), autocast or bf16
weights and full checkpointing as the case says. Set PYTORCH_CUDA_ALLOC_CONF in the environment;
--cap GiB applies torch.cuda.set_per_process_memory_fraction from the start.

    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 tools/gpu/record_trace.py \
        --cases h200-loops.jsonl --case l-gpt2-amp --out trace.json.gz
"""
import argparse
import gzip
import json
import os
import sys

import torch


def load_case(path, cid):
    for line in open(path):
        d = json.loads(line)
        if "case" in d and d["case"]["id"] == cid:
            return d["case"]
    sys.exit(f"{path}: no case {cid}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--cap", type=float, help="allocator cap in GiB")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    case = load_case(a.cases, a.case)
    batch = a.batch or case["batch"]
    import transformers
    torch.cuda.init()
    if a.cap:
        torch.cuda.set_per_process_memory_fraction(a.cap * 2**30 / torch.cuda.mem_get_info()[1])
    torch.cuda.memory._record_memory_history(max_entries=20_000_000, context=None, stacks="python")
    cfg = dict(case["config"])
    mtype = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(mtype, **{k: v for k, v in cfg.items() if not k.startswith("_")})
    kw = {"attn_implementation": case["attention"]} if case.get("attention") else {}
    model = transformers.AutoModelForCausalLM.from_config(config, **kw)
    if case.get("weights") == "bf16":
        model = model.to(torch.bfloat16)
    model = model.cuda()
    if case.get("checkpointing") == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(config.vocab_size, (batch, case["seq"]), device="cuda")
    ac = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(case.get("autocast"))
    outcome = "ran"
    try:
        for _ in range(3):
            with torch.autocast("cuda", dtype=ac, enabled=ac is not None):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        outcome = "oom: " + str(e).splitlines()[0]
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [[e["action"], e["addr"], e["size"], e["stream"]] for e in snap["device_traces"][0]]
    segs = [[s["address"], s["total_size"], s["allocated_size"], s["stream"], s["segment_type"],
             [[b["size"], b["state"]] for b in s["blocks"]]] for s in snap["segments"]]
    st = torch.cuda.memory_stats()
    keys = ["allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak",
            "requested_bytes.all.peak", "num_alloc_retries", "num_ooms"]
    doc = {"case": dict(case, batch=batch), "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                                                          "transformers": transformers.__version__},
           "device": torch.cuda.get_device_name(0),
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"),
           "cap_bytes": int(a.cap * 2**30) if a.cap else None, "outcome": outcome,
           "stats": {k: st.get(k, 0) for k in keys}, "events": events, "segments": segs}
    with gzip.open(a.out, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(a.case, batch, doc["alloc_conf"], outcome, doc["stats"], file=sys.stderr)


if __name__ == "__main__":
    main()
