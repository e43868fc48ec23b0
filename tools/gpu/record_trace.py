#!/usr/bin/env python3
"""Record PyTorch's CUDA caching-allocator event history for one loop case of
shared/gpu/h200-loops.jsonl (or tests/data/gpu), in the format of its traces/: `events` as
[action, addr, size, stream], `segments` at the end, `stats` peaks, plus the allocator settings.

The loop is the data set's: an HF model built from the case's config with random weights, three
steps of `loss = model(input_ids=ids, labels=ids).loss; loss.backward(); opt.step();
opt.zero_grad(set_to_none=True)` with torch.optim.AdamW (foreach on CUDA), autocast or bf16
weights and full checkpointing as the case says. Two optional case fields (tools/gpu/knob-cases.jsonl):
`lora` {r, alpha, targets, adapter_dtype: fp32|model} wraps the model with PEFT's get_peft_model
after checkpointing is enabled (as TRL and the HF Trainer order it; autocast_adapter_dtype=True,
PEFT's default, keeps fp32 adapters on a 16-bit base) and steps only the adapters; `loss`
eager|compiled drops the model's own loss for torchtitan's: `cross_entropy(logits.flatten(0, 1).float(),
labels.flatten(0, 1))` on unshifted labels, run as is or through torch.compile. Set PYTORCH_CUDA_ALLOC_CONF in the environment;
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
    ap.add_argument("--summary", help="append the case and its peaks as one JSON line to this file")
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
    elif case.get("weights") == "fp32":  # from_config may take the config's torch_dtype (transformers 5)
        model = model.float()
    model = model.cuda()
    if case.get("checkpointing") == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if case.get("lora"):
        import peft
        lo = case["lora"]
        model = peft.get_peft_model(model, peft.LoraConfig(
            r=lo["r"], lora_alpha=lo["alpha"], target_modules=lo["targets"], lora_dropout=0.0,
            task_type="CAUSAL_LM"), autocast_adapter_dtype=lo["adapter_dtype"] == "fp32")
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    ce = lambda logits, labels: torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
    if case.get("loss") == "compiled":
        ce = torch.compile(ce)

    def forward():
        if case.get("loss"):
            return ce(model(input_ids=ids).logits, ids)
        return model(input_ids=ids, labels=ids).loss
    ids = torch.randint(config.vocab_size, (batch, case["seq"]), device="cuda")
    params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    ac = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(case.get("autocast"))
    outcome = "ran"
    pre, allocated_before = {}, None
    try:
        for step in range(3):
            if step == 2:  # the measured step, as the data set measures it
                pre = torch.cuda.memory_stats()
                torch.cuda.reset_peak_memory_stats()
                allocated_before = torch.cuda.memory_allocated()
            with torch.autocast("cuda", dtype=ac, enabled=ac is not None):
                loss = forward()
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
    third = torch.cuda.memory_stats()  # the third step's peaks when it ran
    st = {k: max(v, pre.get(k, 0)) if k.endswith(".peak") else v for k, v in third.items()}
    keys = ["allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak",
            "requested_bytes.all.peak", "num_alloc_retries", "num_ooms"]
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__}
    if case.get("lora"):
        versions["peft"] = peft.__version__
    doc = {"case": dict(case, batch=batch), "versions": versions,
           "device": torch.cuda.get_device_name(0),
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"),
           "cap_bytes": int(a.cap * 2**30) if a.cap else None, "outcome": outcome,
           "stats": {k: st.get(k, 0) for k in keys}, "events": events, "segments": segs}
    with gzip.open(a.out, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(a.case, batch, doc["alloc_conf"], outcome, doc["stats"], file=sys.stderr)
    if a.summary:  # one line of the data set's shape: the case and what the allocator said
        with open(a.summary, "a") as f:
            f.write(json.dumps({"case": dict(case, batch=batch), "versions": versions,
                                "alloc_conf": doc["alloc_conf"], "outcome": outcome,
                                "measured": {"peak_allocated": third.get("allocated_bytes.all.peak", 0),
                                             "peak_reserved": third.get("reserved_bytes.all.peak", 0),
                                             "allocated_before": allocated_before,
                                             "all_steps_peak_allocated": st.get("allocated_bytes.all.peak", 0),
                                             "all_steps_peak_reserved": st.get("reserved_bytes.all.peak", 0),
                                             "params": params, "trainable": trainable}}) + "\n")


if __name__ == "__main__":
    main()
