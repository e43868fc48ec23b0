"""Real multi-process training steps on CPU, measured per rank: the per-rank truth memplan's
several-GPU figures are compared with (tests/ranks/test_ranks.py).

Each case starts WORLD processes of this file (`python3 ranks.py worker CASE.json RANK WORLD PORT
OUT`), joined by torch.distributed's Gloo backend over 127.0.0.1. Every rank installs memplan's
counting allocator (python/_memplan_torch: the exact bytes of live CPU tensors, as the
single-process checks count them) before it builds anything, builds the same small Llama-style
decoder, wraps it as the case says (DistributedDataParallel with its options, torch's
ZeroRedundancyOptimizer over it, FSDP where the release runs it on CPU), and runs a bounded number
of steps. Per step it records the peak of live tensor bytes in the forward (the loss included),
in the backward and in optimizer.step(), as calibrate/measure.cpp does for one process; the last
step is the steady one.

The decoder computes what Hugging Face's LlamaForCausalLM computes with eager attention
(transformers' modeling_llama.py: LlamaRMSNorm, rotary cos/sin in the model dtype,
softmax(dtype=float32).to(dtype), the additive (b, 1, s, s) causal mask, SwiGLU, the
ForCausalLMLoss), statement by statement as calibrate/decoder.cpp does, so memplan's model of
that code applies; tests/ranks/tiny-llama/config.json describes it to memplan.

Bounded: each worker arms an alarm (it exits by itself), the process group has a timeout, and
run_world() kills only the processes it started (their own process groups) when the deadline
passes.
"""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the launcher (no torch needed) -----------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WorldFailed(RuntimeError):
    pass


def run_world(case, timeout=120, python=None):
    """Runs `case` (a dict: see worker()) on case["world"] processes; returns each rank's record,
    in rank order. Raises WorldFailed with the ranks' stderr when a rank fails or the deadline
    passes (after killing every process it started)."""
    python = python or sys.executable
    world = int(case["world"])
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="memplan-ranks-") as tmp:
        case_file = os.path.join(tmp, "case.json")
        with open(case_file, "w") as f:
            json.dump(case, f)
        procs = []
        try:
            for rank in range(world):
                out = os.path.join(tmp, f"rank{rank}.json")
                err = open(os.path.join(tmp, f"rank{rank}.err"), "w")
                env = dict(os.environ, OMP_NUM_THREADS="1", MEMPLAN_RANKS_TIMEOUT=str(timeout))
                procs.append((subprocess.Popen([python, os.path.abspath(__file__), "worker", case_file, str(rank), str(world),
                                                str(port), out], stdout=err, stderr=subprocess.STDOUT, env=env,
                                               start_new_session=True), err, out))
            deadline = time.monotonic() + timeout
            for p, _, _ in procs:
                left = deadline - time.monotonic()
                try:
                    p.wait(timeout=max(0.1, left))
                except subprocess.TimeoutExpired:
                    raise WorldFailed(f"{case['name']}: ranks still running after {timeout} s")
        except BaseException as e:
            for p, _, _ in procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)  # the worker's own group: only what this call started
                    except ProcessLookupError:
                        pass
                    p.wait()
            if isinstance(e, WorldFailed):
                raise WorldFailed(str(e) + "\n" + _stderr_of(procs)) from None
            raise
        finally:
            for _, err, _ in procs:
                err.close()
        records = []
        for rank, (p, _, out) in enumerate(procs):
            if p.returncode != 0 or not os.path.exists(out):
                raise WorldFailed(f"{case['name']}: rank {rank} exited {p.returncode}\n" + _stderr_of(procs))
            with open(out) as f:
                records.append(json.load(f))
        return records


def _stderr_of(procs):
    text = []
    for rank, (_, err, _) in enumerate(procs):
        try:
            with open(err.name) as f:
                text.append(f"--- rank {rank}:\n" + f.read()[-3000:])
        except OSError:
            pass
    return "\n".join(text)


# ---- the worker ----------------------------------------------------------------------------

def worker(case_file, rank, world, port, out):
    timeout = int(os.environ.get("MEMPLAN_RANKS_TIMEOUT", "120"))
    signal.alarm(timeout + 5)  # stops by itself even if the launcher is gone
    with open(case_file) as f:
        case = json.load(f)
    sys.path.insert(0, os.environ.get("MEMPLAN_PYTHONPATH", ""))
    import memplan  # noqa: F401  (the counting allocator)
    from memplan import _memplan_torch as counter
    counter.install()  # before any tensor of the model exists

    import datetime
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout))
    rec = {"rank": rank, "world": world, "torch": torch.__version__, "case": case["name"]}
    try:
        steps = measure(case, rank, world, counter, torch, dist)
        rec["steps"] = steps
    except Refused as e:
        rec["refused"] = str(e)
    dist.barrier()
    dist.destroy_process_group()
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f)
    os.replace(tmp, out)


class Refused(Exception):
    """The release refuses the wrapping on this device (recorded, not a failure of the run)."""


def build_model(cfg, torch):
    nn, F = torch.nn, torch.nn.functional
    h, inter, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, V, eps = cfg["num_attention_heads"], cfg["vocab_size"], cfg["rms_norm_eps"]
    d = h // heads
    assert cfg["num_key_value_heads"] == heads, "the harness's decoder has no repeat_kv"

    def linear(i, o):
        lin = nn.Linear(i, o, bias=False)
        with torch.no_grad():
            lin.weight.normal_(0, 0.02)
        return lin

    class RMSNorm(nn.Module):  # LlamaRMSNorm.forward, one statement per line
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(h))

        def forward(self, x):
            in_dtype = x.dtype
            hs = x.to(torch.float32)
            var = hs.pow(2).mean(-1, keepdim=True)
            hs = hs * torch.rsqrt(var + eps)
            return self.weight * hs.to(in_dtype)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rope(q, cos, sin):
        return (q * cos) + (rotate_half(q) * sin)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj, self.o_proj = linear(h, h), linear(h, h), linear(h, h), linear(h, h)

        def forward(self, x, mask, cos, sin):  # LlamaAttention.forward + eager_attention_forward
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, -1, d).transpose(1, 2)
            k = self.k_proj(x).view(b, s, -1, d).transpose(1, 2)
            v = self.v_proj(x).view(b, s, -1, d).transpose(1, 2)
            q = apply_rope(q, cos, sin)
            k = apply_rope(k, cos, sin)
            w = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(d))
            w = w + mask[:, :, :, : k.shape[-2]]
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            o = torch.matmul(w, v)
            o = o.transpose(1, 2).contiguous()
            o = o.reshape(b, s, -1).contiguous()
            o = self.o_proj(o)
            return o, w

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj, self.up_proj, self.down_proj = linear(h, inter), linear(h, inter), linear(inter, h)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.mlp = Attention(), Mlp()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()

        def forward(self, x, mask, cos, sin):
            residual = x
            hs = self.input_layernorm(x)
            hs, self_attn_weights = self.self_attn(hs, mask, cos, sin)  # held until the layer returns
            hs = residual + hs
            residual = hs
            hs = self.post_attention_layernorm(hs)
            hs = self.mlp(hs)
            hs = residual + hs
            return hs

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, h)
            with torch.no_grad():
                self.embed_tokens.weight.normal_(0, 0.02)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])
            self.norm = RMSNorm()
            self.lm_head = linear(h, V)
            inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
            self.register_buffer("inv_freq", inv, persistent=False)

        def forward(self, ids, labels=None):  # LlamaForCausalLM.forward; without labels: the logits
            b, s = ids.shape
            inputs_embeds = self.embed_tokens(ids)
            x = inputs_embeds
            dt = x.dtype
            tri = torch.full((s, s), torch.finfo(dt).min, dtype=dt).triu(1)
            mask = tri[None, None].expand(b, 1, s, s).clone()
            del tri
            pos = torch.arange(s, dtype=torch.float32)
            freqs = torch.outer(pos, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(0)
            cos = emb.cos().to(dt).unsqueeze(1)
            sin = emb.sin().to(dt).unsqueeze(1)
            del pos, freqs, emb
            for layer in self.layers:
                x = layer(x, mask, cos, sin)
            x = self.norm(x)
            del mask, cos, sin, inputs_embeds
            logits = self.lm_head(x)
            del x
            if labels is None:
                return logits
            lf = logits.float()
            shift = F.pad(labels, (0, 1), value=-100)[:, 1:].contiguous()
            return F.cross_entropy(lf.view(-1, V), shift.view(-1), ignore_index=-100)

    torch.manual_seed(0)
    return Decoder()


def token_logps(logits, ids, torch):
    """Each next token's log-probability, as TRL's selective_log_softmax computes it for fp32
    logits (trl/trainer/utils.py @ v1.9.0 L479-510): the chosen logits gathered, minus each row's
    logsumexp taken one row at a time."""
    index = ids[..., 1:].unsqueeze(-1)
    shifted = logits[..., :-1, :]
    picked = torch.gather(shifted, -1, index)
    row_lse = torch.stack([torch.logsumexp(row, dim=-1) for row in shifted])
    return (picked - row_lse.unsqueeze(-1)).squeeze(-1)


def dpo_loss(model, reference, ids, ref_logps, torch, beta=0.1):
    """One DPO loss in the order of TRL's DPOTrainer._compute_loss (trl/trainer/dpo_trainer.py @
    v1.9.0 L1329-1400): the policy's forward over chosen and rejected (one batch) and its
    log-probs; then the reference's forward under no_grad and its log-probs, or the precomputed
    ones; the sigmoid loss. The outputs die when it returns."""
    logits = model(ids)
    logps = token_logps(logits, ids, torch).sum(dim=1)
    chosen, rejected = logps.chunk(2, dim=0)
    if reference is not None:
        with torch.no_grad():
            ref_logits = reference(ids)
        ref = token_logps(ref_logits, ids, torch).sum(dim=1)
        ref_chosen, ref_rejected = ref.chunk(2, dim=0)
    else:
        ref_chosen, ref_rejected = ref_logps
    margin = (chosen - ref_chosen) - (rejected - ref_rejected)
    return -torch.nn.functional.logsigmoid(beta * margin).mean()


def measure(case, rank, world, counter, torch, dist):
    with open(os.path.join(HERE, case.get("model", "tiny-llama"), "config.json")) as f:
        cfg = json.load(f)
    model = build_model(cfg, torch)
    dpo = case.get("loop") == "dpo"
    reference = None
    if dpo and case.get("reference", True):  # a second model of the same weights, frozen, in eval mode
        import copy
        reference = copy.deepcopy(model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
    wrap = case.get("wrap", "ddp")
    ddp_kw = dict(case.get("ddp", {}))
    opt_kw = {"lr": 1e-3}
    if wrap in ("ddp", "zero1"):
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, **ddp_kw)
    elif wrap == "fsdp":
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
            model = FSDP(model, sharding_strategy=getattr(ShardingStrategy, case.get("sharding", "FULL_SHARD")))
        except Exception as e:  # torch 1.13's FSDP wants a CUDA device
            raise Refused(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    elif wrap != "none":
        raise ValueError(f"unknown wrap {wrap!r}")
    if wrap == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, **opt_kw)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), **opt_kw)
    set_to_none = bool(case.get("set_to_none", True))
    b, s = int(case["micro_batch"]), int(case["seq_len"])
    g = torch.Generator().manual_seed(1000 + rank)
    ids = torch.randint(cfg["vocab_size"], (b, s), generator=g)
    labels = ids.clone()
    ref_logps = (torch.zeros(b // 2), torch.zeros(b // 2))  # precompute_ref_log_probs: one number per sequence
    steps = []
    tracing = os.environ.get("MEMPLAN_TRACE_ALLOC") is not None  # the counter prints allocations: mark the phases

    def mark(what):
        if tracing:
            print(f"== step {step} {what} (live {counter.current_bytes():,})", file=sys.stderr, flush=True)

    for step in range(1, int(case.get("steps", 3)) + 1):
        rec = {"step": step}
        mark("forward")
        counter.reset_peak()
        loss = dpo_loss(model, reference, ids, ref_logps, torch) if dpo else model(ids, labels)
        rec["forward"] = counter.peak_bytes()
        mark("backward")
        counter.reset_peak()
        loss.backward()
        del loss
        rec["backward"] = counter.peak_bytes()
        mark("optimizer step")
        counter.reset_peak()
        optimizer.step()
        rec["optimizer_step"] = counter.peak_bytes()
        optimizer.zero_grad(set_to_none=set_to_none)
        rec["between_steps"] = counter.current_bytes()
        steps.append(rec)
    return steps


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif len(sys.argv) == 3 and sys.argv[1] == "run":
        with open(sys.argv[2]) as f:
            print(json.dumps(run_world(json.load(f)), indent=1))
    else:
        sys.exit("usage: ranks.py run CASE.json | ranks.py worker CASE.json RANK WORLD PORT OUT")
