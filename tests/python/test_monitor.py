"""memplan.Monitor inside real PyTorch CPU training loops: exact tensor bytes through the counting
allocator, a leak injected by keeping tensors across steps is flagged within a few steps, a clean
loop flags nothing, departures from an estimate name a term, critical readings get memplan fit's
recommendation, and bad input is a clear error that never stops the loop.

Needs torch (Debian's python3-torch) and memplan's _memplan_torch; ctest runs it only when CMake
built that extension.
"""

import json
import os
import tempfile
import unittest

import torch

import memplan

MIB = 2**20
# Install the counter before any model exists (what the README tells users to do).
assert memplan.install_cpu_counter(), "this build has no _memplan_torch: CMake should not have added this test"


def make_model(width=256, depth=3):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


def param_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


def train(monitor, steps, leak_bytes_per_step=0, batch=64, width=256, accumulation=1, optimizer="adam"):
    model = make_model(width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3) if optimizer == "adam" else torch.optim.SGD(model.parameters(), lr=1e-3)
    kept = []  # the injected leak: tensors appended to a list every step
    statuses = []
    monitor.start()
    for step in range(1, steps + 1):
        for _ in range(accumulation):
            x = torch.randn(batch, width)
            loss = model(x).pow(2).mean() / accumulation
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if leak_bytes_per_step:
            kept.append(torch.ones(leak_bytes_per_step // 4))  # float32
        del x, loss
        statuses.append(monitor.step(step))
    return model, statuses


class CpuMonitor(unittest.TestCase):
    def test_counts_exact_tensor_bytes(self):
        monitor = memplan.Monitor(device="cpu")
        self.assertEqual(monitor.reader.kind, "cpu-counter")
        base = memplan._memplan_torch.current_bytes()
        model = make_model()
        self.assertEqual(memplan._memplan_torch.current_bytes() - base, param_bytes(model))
        del model

    def test_clean_loop_flags_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "clean.jsonl")
            monitor = memplan.Monitor(device="cpu", log=path)
            model, statuses = train(monitor, steps=12)
            monitor.close()
            for s in statuses:
                self.assertIsNone(s.error)
                self.assertIsNone(s.leak, s.line())
                self.assertEqual(s.band, "normal")
                self.assertNotIn("leak", s.events)
                self.assertGreater(s.peak_bytes, s.allocated_bytes)  # activations and grads come and go
            # Between steps: parameters and Adam's two moments, nothing else (grads set to None).
            self.assertEqual(statuses[-1].allocated_bytes - statuses[0].allocated_bytes, 0)
            records = memplan.read_log(path)
            self.assertEqual([r["kind"] for r in records], ["start"] + ["step"] * 12 + ["end"])
            self.assertTrue(all(r["schema"] == "memplan.monitor/v1" for r in records))
            self.assertEqual(records[-1]["leak"], None)

    def test_injected_leak_is_flagged_within_a_few_steps(self):
        monitor = memplan.Monitor(device="cpu")
        _, statuses = train(monitor, steps=12, leak_bytes_per_step=MIB)
        flagged = [s for s in statuses if s.leak]
        self.assertTrue(flagged, [s.line() for s in statuses])
        first = flagged[0]
        # warmup (2 steps) + a window of 4 steps of growth: flagged at step 7.
        self.assertLessEqual(first.step, 7, first.line())
        self.assertIn("leak", first.events)
        self.assertAlmostEqual(first.leak["rate_bytes_per_step"], MIB, delta=0.01 * MIB)
        self.assertTrue(all(s.leak for s in statuses[statuses.index(first):]))

    def test_leak_with_accumulation_is_per_optimizer_step(self):
        monitor = memplan.Monitor(device="cpu")
        _, statuses = train(monitor, steps=10, leak_bytes_per_step=2 * MIB, accumulation=3)
        self.assertTrue(statuses[-1].leak)
        self.assertAlmostEqual(statuses[-1].leak["rate_bytes_per_step"], 2 * MIB, delta=0.02 * MIB)

    def test_departure_names_the_term(self):
        # An estimate document whose model states match this loop but whose activations are a
        # tenth of what the loop allocates: the departure is in the dynamic terms.
        # The counter sees every live CPU tensor of the process: keep nothing else alive here.
        p, tensors = param_bytes(make_model()), len(list(make_model().parameters()))
        probe = memplan.Monitor(device="cpu")
        statuses = train(probe, steps=3)[1]
        resident = statuses[-1].allocated_bytes
        # Weights, Adam's two moments and its per-parameter float32 step count (a tensor since
        # torch 1.12); the gradients were set to None.
        self.assertEqual(resident, 3 * p + 4 * tensors)
        dynamic = statuses[-1].peak_bytes - resident
        def doc(states, activations):
            terms = {"weights": p, "gradients": 0, "master_weights": 0, "optimizer_states": states,
                     "activations": activations, "logits_and_loss": 0, "transient": 0, "workspace": 0,
                     "cuda_context": 0, "allocator_overhead": 0, "comm_buffers": 0}
            return {"per_gpu": {"peak_bytes": sum(terms.values()), "peak_phase": "backward",
                                "terms": [{"name": k, "bytes": v} for k, v in terms.items()]}}
        monitor = memplan.Monitor(device="cpu", estimate=doc(2 * p, dynamic // 10), tolerance=0.10)
        statuses = train(monitor, steps=5)[1]
        departed = [s for s in statuses if "departure" in s.events]
        self.assertEqual(len(departed), 1)
        d = departed[0].departure
        self.assertEqual(d["step"], 3)  # the first step after warmup
        self.assertGreater(d["error"], 0.10)
        self.assertEqual(d["term"], "activations")
        # Now the states are wrong (SGD keeps none; the estimate says Adam's two moments).
        monitor = memplan.Monitor(device="cpu", estimate=doc(2 * p, dynamic), tolerance=0.05)
        statuses = train(monitor, steps=4, optimizer="sgd")[1]
        d = statuses[-1].departure
        self.assertIsNotNone(d, [s.line() for s in statuses])
        self.assertEqual(d["term"], "optimizer_states")
        self.assertLess(d["error"], 0)

    def test_critical_gets_fits_recommendation(self):
        setup = dict(model="gpt2", micro_batch=8, grad_accum=4, seq_len=512, device="cpu")
        capacity = 6 * 2**30
        # Tiny thresholds make this small loop critical at once; the recommendation is fit's for
        # the setup on a 6 GiB device.
        monitor = memplan.Monitor(device="cpu", setup=setup, capacity=capacity,
                                  thresholds={"warning": 1e-6, "critical": 2e-6, "emergency": 0.99})
        _, statuses = train(monitor, steps=2)
        rec = statuses[0].recommendation
        self.assertEqual(statuses[0].band, "critical")
        self.assertIn("recommendation", statuses[0].events)
        self.assertIsNone(statuses[1].recommendation)  # once per band
        fit = memplan.fit(**setup, gpu_memory=f"{capacity}B")
        self.assertGreaterEqual(fit["largest_micro_batch"], 1)
        self.assertLessEqual(rec["micro_batch"], fit["largest_micro_batch"])
        self.assertEqual(rec["micro_batch"] * rec["grad_accum"], 32)  # the effective batch is kept
        self.assertEqual(rec["flags"], f"--micro-batch {rec['micro_batch']} --grad-accum {rec['grad_accum']}")
        self.assertLessEqual(rec["peak_bytes"], 0.90 * capacity)

    def test_an_estimate_document_gives_back_its_setup(self):
        # A Monitor given only estimate= asks fit about the document's setup. A memplan.estimate()
        # document carries its call's keywords; fit then answers as for setup= (a hand-picked dozen
        # fields once dropped the runtime switches, FSDP and the LoRA dropout, and explicit
        # defaults such as liger=False narrowed fit's search).
        from memplan.monitor import _setup_keywords
        cases = [dict(model="gpt2", micro_batch=2, seq_len=128, liger=True, fsdp="full_shard", gpus=2,
                      finetune="lora", lora_dropout=0.1, expandable_segments=True, gpu="h100-80gb"),
                 dict(model="moe-nano", micro_batch=1, seq_len=256, gpus=4, expert_parallel=2, zero=2, compile=True),
                 dict(model="llama-3.2-1b", micro_batch=1, seq_len=4096, precision="amp-bf16"),
                 dict(model="llama-3.2-1b", micro_batch=1, seq_len=512, finetune="qlora", lora_rank=32,
                      lora_targets="q_proj,v_proj", checkpointing="full", optimizer="adamw-8bit", loss="chunked"),
                 dict(model="gpt2", micro_batch=4, seq_len=64, device="cpu", torch_version="2.4")]
        for kw in cases:
            with self.subTest(**{k: str(v) for k, v in kw.items()}):
                back = _setup_keywords(memplan.estimate(**kw))
                self.assertEqual(back, kw)
                gpu_memory = f"{20 * 2**30}B"
                mine, theirs = memplan.fit(**back, gpu_memory=gpu_memory), memplan.fit(**kw, gpu_memory=gpu_memory)
                self.assertEqual(mine["largest_micro_batch"], theirs["largest_micro_batch"])
                self.assertEqual([o["flags"] for o in mine.get("options", [])], [o["flags"] for o in theirs.get("options", [])])

    def test_a_cli_document_gives_back_its_flags(self):
        # A `memplan estimate --json` document: the flags its sources name, with the values its
        # setup shows (the card by name), and nothing a default chose.
        binary = os.environ.get("MEMPLAN_BIN")
        if not binary:
            self.skipTest("MEMPLAN_BIN not set")
        import subprocess
        from memplan.monitor import _setup_keywords
        cases = [(["--model", "gpt2", "--gpu", "h100-80gb", "--micro-batch", "2", "--seq-len", "128", "--liger",
                   "--fsdp", "full_shard", "--gpus", "2", "--finetune", "lora", "--lora-dropout", "0.1"],
                  dict(model="gpt2", gpu="h100-80gb", micro_batch=2, seq_len=128, liger=True, fsdp="full", gpus=2,
                       finetune="lora", lora_dropout=0.1)),
                 # A switch a flag turned off: its negation is its source.
                 (["--model", "gpt2", "--gpu", "t4", "--finetune", "qlora", "--no-double-quant", "--no-liger"],
                  dict(model="gpt2", gpu="t4", finetune="qlora", double_quant=False, liger=False))]
        for flags, want in cases:
            with self.subTest(flags=" ".join(flags)):
                doc = json.loads(subprocess.run([binary, "estimate", *flags, "--json"], check=True, capture_output=True,
                                                text=True).stdout)
                back = _setup_keywords(doc)
                self.assertEqual(back, want)
                again = memplan.estimate(**back, from_interpreter=False)
                self.assertEqual(again["per_gpu"]["peak_bytes"], doc["per_gpu"]["peak_bytes"])
                self.assertEqual(_setup_keywords(dict(again)), want)  # a plain copy of a Python document too

    def test_replay_through_the_cli(self):
        binary = os.environ.get("MEMPLAN_BIN")
        if not binary:
            self.skipTest("MEMPLAN_BIN not set")
        import subprocess
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "leak.jsonl")
            with memplan.Monitor(device="cpu", log=path) as monitor:
                train(monitor, steps=9, leak_bytes_per_step=MIB)
            p = subprocess.run([binary, "watch", "--replay", path], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("[step 9] Memory:", p.stdout)
            self.assertIn("leak: +1.0 MiB/step", p.stdout)


class Bands(unittest.TestCase):
    def test_the_monitor_names_the_band_estimate_names(self):
        # One definition (estimator/breakdown.h): the monitor's band of a fraction is the band
        # `memplan estimate` gives a peak at that fraction of the card.
        self.assertEqual(memplan.monitor.BANDS, ("normal", "above_target", "warning", "critical", "emergency", "out_of_memory"))
        doc = memplan.estimate(model="gpt2", seq_len=128, from_interpreter=False)
        peak = doc["verdict"]["needed_bytes"]
        for u in (0.5, 0.905, 0.93, 0.96, 0.99, 1.2):
            capacity = int(peak / u)
            est = memplan.estimate(model="gpt2", seq_len=128, gpu_memory=f"{capacity}B", from_interpreter=False)
            mine = memplan.monitor.band_of(est["verdict"]["utilization"])
            self.assertEqual(mine, est["verdict"]["status"], u)
        self.assertEqual(memplan.monitor.band_of(0.90), "normal")
        self.assertEqual(memplan.monitor.band_of(0.91), "above_target")
        self.assertEqual(memplan.monitor.band_of(0.93, {"target": 0.5, "warning": 0.6, "critical": 0.7, "emergency": 0.8}),
                         "emergency")


class BadInput(unittest.TestCase):
    def test_device_that_does_not_exist(self):
        for device in ("cuda:0", "cuda:7", "cuda"):
            with self.assertRaises(memplan.InputError) as caught:
                memplan.Monitor(device=device)
            self.assertIn("does not exist", caught.exception.message)
            self.assertEqual(caught.exception.keyword, "device")
        with self.assertRaises(memplan.InputError):
            memplan.Monitor(device="tpu")

    def test_thresholds(self):
        with self.assertRaises(memplan.InputError):
            memplan.Monitor(device="cpu", thresholds={"warning": 0.97, "critical": 0.95})
        with self.assertRaises(memplan.InputError) as caught:
            memplan.Monitor(device="cpu", thresholds={"critcal": 0.95})
        self.assertIn("critcal", caught.exception.message)

    def test_existing_log_is_not_replaced(self):
        with tempfile.NamedTemporaryFile() as f:
            with self.assertRaises(memplan.InputError) as caught:
                memplan.Monitor(device="cpu", log=f.name)
            self.assertEqual(caught.exception.file, f.name)

    def test_a_failing_reading_never_raises(self):
        monitor = memplan.Monitor(device="cpu")
        def broken():
            raise OSError("device went away")
        monitor.reader.read = broken
        status = monitor.step(1)
        self.assertIn("device went away", status.error)

    def test_read_log_position(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.jsonl")
            with open(path, "w") as f:
                f.write(json.dumps({"schema": "memplan.monitor/v1", "kind": "start"}) + "\n{oops\n")
            with self.assertRaises(memplan.InputError) as caught:
                memplan.read_log(path)
            self.assertEqual((caught.exception.line, caught.exception.col), (2, 2))

    def test_read_log_refuses_what_is_not_a_log_file(self):
        # A FIFO would block the reader; /dev/zero would fill its memory; a line with no end too.
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "fifo")
            os.mkfifo(fifo)
            with self.assertRaises(memplan.InputError) as caught:
                memplan.read_log(fifo)
            self.assertIn("not a regular file", str(caught.exception))
            if os.path.exists("/dev/zero"):
                with self.assertRaises(memplan.InputError):
                    memplan.read_log("/dev/zero")
            long = os.path.join(d, "long.jsonl")
            with open(long, "w") as f:
                f.write(json.dumps({"schema": "memplan.monitor/v1", "kind": "start"}) + "\n" + "x" * (2 << 20))
            with self.assertRaises(memplan.InputError) as caught:
                memplan.read_log(long)
            self.assertEqual(caught.exception.line, 2)
            with self.assertRaises(memplan.InputError):
                memplan.read_log(os.path.join(d, "missing.jsonl"))


if __name__ == "__main__":
    unittest.main()
