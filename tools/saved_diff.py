#!/usr/bin/env python3
"""What autograd really saves in one decoder layer, next to what memplan says it saves.

How memplan's per-op tables are checked against real modelling code (issue 18 part 3): run one
training forward of a model with torch.autograd.graph.saved_tensors_hooks recording every saved
tensor (grouped by storage, the way memory is actually held), attribute each to the module that
was running, and print it beside `memplan explain activations --json` for the same setup.

    # a Hugging Face model built from its config (random weights, nothing downloaded):
    python3 tools/saved_diff.py --hf-config path/to/config.json --micro-batch 1 --seq-len 512 \
        --dtype bf16 [--attn sdpa|eager] [--memplan build/memplan] [--layer 0]

    # any torch module factory (for tests and non-HF code): MODULE:FUNCTION returning
    # (model, example_inputs) where model(*example_inputs) returns the loss
    python3 tools/saved_diff.py --factory mypkg.mymod:make --memplan ''

Needs torch; --hf-config also needs transformers. Rows are "module  storage bytes  dtype  shape";
totals per layer are compared with memplan's total per layer (the same storage counted once).
"""
import argparse
import importlib
import json
import subprocess
import sys
from collections import OrderedDict


def storage_key(t):
    """(data pointer, bytes) of the storage behind a tensor, for torch 1.13 and 2.x."""
    try:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    except AttributeError:  # torch 1.13
        s = t.storage()
        return s.data_ptr(), s.nbytes()


class SavedRecorder:
    """Records tensors autograd saves during a forward, by storage, with the module running."""

    def __init__(self, model):
        import torch

        self.torch = torch
        self.stack = []
        self.rows = OrderedDict()  # storage key -> dict
        self.handles = []
        self.params = {storage_key(p)[0] for p in model.parameters()}
        for name, module in model.named_modules():
            self.handles.append(module.register_forward_pre_hook(self._enter(name or "<model>")))
            self.handles.append(module.register_forward_hook(self._leave()))

    def _enter(self, name):
        def hook(_module, _inputs):
            self.stack.append(name)

        return hook

    def _leave(self):
        def hook(_module, _inputs, _output):
            if self.stack:
                self.stack.pop()

        return hook

    def pack(self, t):
        ptr, nbytes = storage_key(t)
        if ptr not in self.params and (ptr, nbytes) not in self.rows:
            self.rows[(ptr, nbytes)] = {
                "module": self.stack[-1] if self.stack else "<outside>",
                "bytes": nbytes,
                "dtype": str(t.dtype).replace("torch.", ""),
                "shape": list(t.shape),
            }
        return t

    def run(self, fn):
        with self.torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t):
            out = fn()
        for h in self.handles:
            h.remove()
        return out


def layer_of(module, layer_marker):
    """The decoder layer index in an HF module path ('model.layers.3.mlp' -> 3), or None."""
    parts = module.split(".")
    for i, p in enumerate(parts[:-1]):
        if p == layer_marker and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None


def hf_model(args):
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(args.hf_config)
    config.use_cache = False
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    kwargs = {"torch_dtype": dtype}
    if args.attn:
        kwargs["attn_implementation"] = args.attn
    model = transformers.AutoModelForCausalLM.from_config(config, **kwargs)
    model.train()
    ids = torch.randint(0, config.vocab_size, (args.micro_batch, args.seq_len))
    return model, (lambda: model(input_ids=ids, labels=ids).loss)


def factory_model(spec):
    mod, _, fn = spec.partition(":")
    model, inputs = getattr(importlib.import_module(mod), fn)()
    return model, (lambda: model(*inputs))


def memplan_rows(args):
    if not args.memplan:
        return None
    cmd = [args.memplan, "explain", "activations", "--model", args.hf_config, "--micro-batch", str(args.micro_batch),
           "--seq-len", str(args.seq_len), "--precision", args.dtype, "--device", args.device, "--json"]
    if args.attn:
        cmd += ["--attention", args.attn]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return doc["estimate"]["per_gpu"]["saved_tensors_per_layer"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hf-config", help="an HF config.json (or model folder) to build with transformers")
    p.add_argument("--factory", help="MODULE:FUNCTION returning (model, inputs); model(*inputs) returns the loss")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--attn", help="attn_implementation (sdpa, eager, flash_attention_2)")
    p.add_argument("--device", default="cpu", help="memplan --device for the comparison (cpu or cuda)")
    p.add_argument("--layer", type=int, default=0, help="the decoder layer to list (default 0)")
    p.add_argument("--memplan", default="build/memplan", help="memplan binary ('' to skip the comparison)")
    p.add_argument("--json", action="store_true", help="print the recorded rows as JSON")
    args = p.parse_args(argv)
    if bool(args.hf_config) == bool(args.factory):
        p.error("give exactly one of --hf-config and --factory")

    model, step = hf_model(args) if args.hf_config else factory_model(args.factory)
    rec = SavedRecorder(model)
    loss = rec.run(step)
    loss.backward()
    rows = list(rec.rows.values())
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0

    layer_rows = [r for r in rows if layer_of(r["module"], "layers") == args.layer] if args.hf_config else rows
    print(f"saved by torch (layer {args.layer}):" if args.hf_config else "saved by torch:")
    for r in layer_rows:
        print(f"  {r['module']:<48} {r['bytes']:>14,} {r['dtype']:<9} {r['shape']}")
    total = sum(r["bytes"] for r in layer_rows)
    print(f"  {'total':<48} {total:>14,}")
    theirs = memplan_rows(args) if args.hf_config else None
    if theirs is not None:
        label = f"dense layer {args.layer}"
        mine = [r for r in theirs if r["segment"].startswith(label) or r["segment"].startswith(f"MoE layer {args.layer}")]
        print(f"\nsaved according to memplan ({mine[0]['segment'] if mine else label}):")
        for r in mine:
            print(f"  {r['op']:<48} {r['bytes']:>14,} {r['category']}")
        mtotal = sum(r["bytes"] for r in mine)
        print(f"  {'total':<48} {mtotal:>14,}")
        diff = mtotal - total
        print(f"\nmemplan - torch: {diff:+,} B ({100.0 * diff / total if total else 0:+.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
