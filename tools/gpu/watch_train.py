#!/usr/bin/env python3
"""A real HF Trainer run for `memplan watch` to watch (issue 27's watched run): Qwen2.5-0.5B built
from its config (tests/data/gpu/h200-loops.jsonl, case l-qwen05-amp-gc; random weights) on random
token ids, bf16 autocast (TrainingArguments bf16=True), full non-reentrant gradient checkpointing,
AdamW (adamw_torch), micro-batch 8 x 1024 tokens, accumulation 2, an evaluation every 40 optimizer
steps (loss only). Each optimizer step's torch.cuda figures go to --steps as JSON lines: the step's
peak allocated and reserved (peaks reset after each record), allocated and reserved now, and
cudaMemGetInfo's used, with the time since the script started.

    memplan watch --log watch.jsonl [setup flags] -- python3 tools/gpu/watch_train.py --steps steps.jsonl
"""
import argparse
import json
import tempfile
import time

import torch
import transformers

T0 = time.time()


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab, seed):
        self.n, self.seq, self.vocab, self.seed = n, seq, vocab, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        ids = torch.randint(self.vocab, (self.seq,), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


class StepRecorder(transformers.TrainerCallback):
    def __init__(self, path):
        self.f = open(path, "w")

    def record(self, kind, state):
        free, total = torch.cuda.mem_get_info()
        self.f.write(json.dumps({
            "t": round(time.time() - T0, 3), "kind": kind, "step": state.global_step,
            "peak_allocated": torch.cuda.max_memory_allocated(), "peak_reserved": torch.cuda.max_memory_reserved(),
            "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
            "device_used": total - free, "device_total": total}) + "\n")
        self.f.flush()
        torch.cuda.reset_peak_memory_stats()

    def on_step_end(self, args, state, control, **kw):
        self.record("step", state)

    def on_evaluate(self, args, state, control, **kw):
        self.record("evaluate", state)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="tests/data/gpu/h200-loops.jsonl")
    ap.add_argument("--steps", required=True)
    ap.add_argument("--max-steps", type=int, default=120)
    a = ap.parse_args()
    case = next(json.loads(l)["case"] for l in open(a.cases) if '"l-qwen05-amp-gc"' in l and '"case"' in l)
    cfg = dict(case["config"])
    mtype = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(mtype, **{k: v for k, v in cfg.items() if not k.startswith("_")})
    model = transformers.AutoModelForCausalLM.from_config(config)
    seq, batch = 1024, 8
    out = tempfile.mkdtemp()
    args = transformers.TrainingArguments(
        output_dir=out, per_device_train_batch_size=batch, per_device_eval_batch_size=batch,
        gradient_accumulation_steps=2, max_steps=a.max_steps, bf16=True, gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False}, optim="adamw_torch", learning_rate=1e-4,
        logging_steps=20, eval_strategy="steps", eval_steps=40, prediction_loss_only=True,
        save_strategy="no", report_to=[], dataloader_num_workers=0, seed=0)
    trainer = transformers.Trainer(
        model=model, args=args,
        train_dataset=RandomTokens(a.max_steps * batch * 2, seq, config.vocab_size, 1),
        eval_dataset=RandomTokens(4 * batch, seq, config.vocab_size, 2),
        callbacks=[StepRecorder(a.steps)])
    trainer.train()
    print(json.dumps({"seconds": round(time.time() - T0, 1), "torch": torch.__version__,
                      "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
