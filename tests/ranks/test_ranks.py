"""memplan's per-rank figures against real multi-process steps (ranks.py: Gloo on 127.0.0.1, torch's
own DistributedDataParallel and ZeroRedundancyOptimizer, the counting allocator on every rank).

Each case names the world, how ranks.py wraps the model, the memplan config under cases/ (plus
flags) that describes the same job, and the tolerance. For every rank and every phase of the
steady step (forward with the loss, backward, optimizer.step()) memplan's figure for that rank
(per_gpu.ranks where the ranks differ, else per_gpu) must be within the tolerance of the measured
peak of live tensor bytes; the table is printed (`ctest -V -R ranks_gloo`).

Needs Debian's python3-torch and memplan's _memplan_torch (MEMPLAN_PYTHONPATH: the build's python
folder) and the memplan binary (MEMPLAN_BIN). Each world is bounded (ranks.run_world's timeout).
"""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ranks  # noqa: E402

MEMPLAN = os.environ.get("MEMPLAN_BIN", os.path.join(HERE, "..", "..", "build", "memplan"))
PHASES = ("forward", "backward", "optimizer_step")
STEP = {"micro_batch": 2, "seq_len": 128, "steps": 3}  # as the configs under cases/ say

# name, world, ranks.py's wrapping, memplan config + flags, tolerance (fraction of the measured peak)
CASES = [
    ("DDP, 2 ranks", 2, {"wrap": "ddp"}, ["ddp.yaml"], 0.01),
    ("DDP, a world of one", 1, {"wrap": "ddp"}, ["ddp-one-rank.yaml"], 0.01),
    ("DDP, 4 ranks", 4, {"wrap": "ddp"}, ["ddp.yaml", "--gpus", "4"], 0.01),
    ("DDP, bucket_cap_mb 1", 2, {"wrap": "ddp", "ddp": {"bucket_cap_mb": 1}}, ["ddp.yaml"], 0.01),
    ("DDP, find_unused_parameters", 2, {"wrap": "ddp", "ddp": {"find_unused_parameters": True}}, ["ddp.yaml"], 0.01),
    ("DDP, zero_grad keeps gradients", 2, {"wrap": "ddp", "set_to_none": False}, ["ddp.yaml", "--no-zero-grad-set-to-none"], 0.01),
    ("DDP, gradient_as_bucket_view", 2, {"wrap": "ddp", "ddp": {"gradient_as_bucket_view": True}}, ["ddp-bucket-view.yaml"], 0.01),
    ("DDP, bucket view, keeps gradients", 2, {"wrap": "ddp", "ddp": {"gradient_as_bucket_view": True}, "set_to_none": False},
     ["ddp-bucket-view.yaml", "--no-zero-grad-set-to-none"], 0.01),
    ("ZeroRedundancyOptimizer, 2 ranks", 2, {"wrap": "zero1"}, ["zero-redundancy.yaml"], 0.01),
    # 2,630,912 parameters over 3 ranks: uneven shares (rank 2 holds 60,160 fewer: 836,864)
    ("ZeroRedundancyOptimizer, 3 ranks", 3, {"wrap": "zero1"}, ["zero-redundancy.yaml", "--gpus", "3"], 0.01),
    ("ZeroRedundancyOptimizer, 4 ranks", 4, {"wrap": "zero1"}, ["zero-redundancy.yaml", "--gpus", "4"], 0.01),
    # TRL's DPO step (ranks.dpo_loss): chosen and rejected in one batch of 2, with a frozen reference
    # model, and with the reference log-probs precomputed. The second's forward is memplan's model of
    # HF's cross-entropy head, not TRL's selective_log_softmax: +2.3% here, hence its 3%.
    ("DPO, reference model", 1, {"wrap": "none", "loop": "dpo"}, ["dpo-reference.yaml"], 0.01),
    ("DPO, precomputed reference log-probs", 1, {"wrap": "none", "loop": "dpo", "reference": False}, ["dpo-precomputed.yaml"], 0.03),
]


def memplan_ranks(args, world):
    """memplan's phases per rank: a list (one per rank) of {phase: bytes}."""
    config, flags = os.path.join(HERE, "cases", args[0]), args[1:]
    out = subprocess.run([MEMPLAN, "estimate", "--config", config, *flags, "--json"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"memplan estimate {args} exited {out.returncode}: {out.stderr}")
    doc = json.loads(out.stdout)
    per_gpu = doc["per_gpu"]
    worst = {ph["name"]: ph["bytes"] for ph in per_gpu["phases"]}
    if "ranks" not in per_gpu:
        return [dict(worst) for _ in range(world)], doc
    by_rank = {}  # entries cover consecutive ranks that hold the same
    for entry in per_gpu["ranks"]:
        for r in range(entry["first_rank"], entry["last_rank"] + 1):
            by_rank[r] = entry["phases"]
    return [by_rank[r] for r in range(world)], doc


class Ranks(unittest.TestCase):
    rows = []

    @classmethod
    def tearDownClass(cls):
        print(f"\nper-rank peaks of live tensor bytes, steady step (torch {cls.torch}, Gloo on 127.0.0.1)")
        print(f"{'case':36} {'rank':>4} {'phase':15} {'measured':>12} {'memplan':>12} {'error':>8}")
        for r in cls.rows:
            print(f"{r[0]:36} {r[1]:>4} {r[2]:15} {r[3]:>12,} {r[4]:>12,} {r[5]:>+7.2f}%")

    torch = "?"

    def run_case(self, name, world, wrap, args, tol):
        case = dict(STEP, name=name, world=world, **wrap)
        measured = ranks.run_world(case, timeout=180)
        Ranks.torch = measured[0]["torch"]
        expected, _ = memplan_ranks(args, world)
        for rank, rec in enumerate(measured):
            self.assertNotIn("refused", rec, f"{name}: rank {rank} refused: {rec.get('refused')}")
            steady = rec["steps"][-1]
            self.assertEqual(rec["steps"][-2]["backward"], steady["backward"], f"{name}: step {len(rec['steps'])} is not steady")
            for phase in PHASES:
                got, want = expected[rank][phase], steady[phase]
                err = (got - want) / want
                Ranks.rows.append((name, rank, phase, want, got, 100 * err))
                with self.subTest(case=name, rank=rank, phase=phase):
                    self.assertLessEqual(abs(err), tol, f"{name} rank {rank} {phase}: memplan {got:,} vs measured {want:,}")

    def test_reference_model_cost(self):
        # What the reference model adds, per phase: measured with and without it, against memplan's
        # figures for the same two configs. Backward and the step hold its weights only.
        got = {}
        for ref in (True, False):
            case = dict(STEP, name="DPO", world=1, wrap="none", loop="dpo", reference=ref)
            got[ref] = ranks.run_world(case, timeout=180)[0]["steps"][-1]
        with_ref, _ = memplan_ranks(["dpo-reference.yaml"], 1)
        without, _ = memplan_ranks(["dpo-precomputed.yaml"], 1)
        for phase in PHASES:
            measured = got[True][phase] - got[False][phase]
            modelled = with_ref[0][phase] - without[0][phase]
            print(f"\nreference model, {phase}: measured +{measured:,}, memplan +{modelled:,}")
            if phase != "forward":  # the forward's moment moves (the reference's no-grad pass)
                self.assertLessEqual(abs(modelled - measured), 0.01 * measured, phase)

    def test_fsdp_on_this_torch(self):
        # torch 1.13's FSDP does not run here (its sharded_tensor metadata fails to import on
        # Python 3.11, and it wants CUDA): recorded, and memplan's FSDP text says it is unverified.
        measured = ranks.run_world(dict(STEP, name="FSDP FULL_SHARD", world=2, wrap="fsdp"), timeout=120)
        if "refused" not in measured[0]:
            self.skipTest("FSDP ran on this torch: add its cases")
        out = subprocess.run([MEMPLAN, "estimate", "--config", os.path.join(HERE, "cases", "ddp.yaml"), "--fsdp", "full"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("not checked against a multi-process run", out.stdout)
        print(f"\nFSDP FULL_SHARD on torch {measured[0]['torch']}: refused ({measured[0]['refused']})")


def _make(case):
    def test(self):
        self.run_case(*case)
    return test


for i, c in enumerate(CASES):
    setattr(Ranks, f"test_{i:02d}_" + "".join(ch if ch.isalnum() else "_" for ch in c[0].lower()), _make(c))

if __name__ == "__main__":
    unittest.main()
