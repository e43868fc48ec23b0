"""memplan.integrations in loops that call the hooks in each framework's order, with neither
framework installed: a real PyTorch CPU model trains, the callback reads once per optimizer step,
and a leak injected in the loop is flagged.

HF Trainer order (src/transformers/trainer.py, _inner_training_loop @ v4.52.4): on_train_begin,
on_epoch_begin, then per optimizer step on_step_begin, on_substep_end after each micro-batch but
the last, optimizer.step(), zero_grad(), global_step += 1, on_step_end, on_log; on_epoch_end,
on_train_end. The CallbackHandler passes model=, optimizer=, ... as keywords.

Lightning order (src/lightning/pytorch/loops/training_epoch_loop.py @ 2.5.0): on_fit_start,
on_train_start, on_train_epoch_start, per batch on_train_batch_start, backward, on the batches that
step on_before_optimizer_step, step, on_before_zero_grad, zero_grad (global_step counts optimizer
steps), on_train_batch_end; on_train_epoch_end, on_train_end, on_fit_end.
"""

import sys
import types
import unittest

import torch

import memplan
import memplan.integrations

MIB = 2**20
memplan.install_cpu_counter()


def model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def micro_batch(model, accumulation):
    loss = model(torch.randn(32, 128)).pow(2).mean() / accumulation
    loss.backward()


class NoFrameworkImported(unittest.TestCase):
    def test_frameworks_are_not_imported_until_used(self):
        self.assertNotIn("transformers", sys.modules)
        self.assertNotIn("lightning", sys.modules)
        self.assertNotIn("pytorch_lightning", sys.modules)


class HFTrainerOrder(unittest.TestCase):
    def run_loop(self, callback, steps, accumulation, leak=0):
        model, opt = model_and_optimizer()
        args = types.SimpleNamespace(device=torch.device("cpu"), gradient_accumulation_steps=accumulation)
        state = types.SimpleNamespace(global_step=0, epoch=0.0, max_steps=steps, is_local_process_zero=True)
        control = types.SimpleNamespace(should_training_stop=False, should_save=False, should_log=False,
                                        should_evaluate=False, should_epoch_stop=False)
        extras = dict(model=model, tokenizer=None, optimizer=opt, lr_scheduler=None, train_dataloader=None,
                      eval_dataloader=None)

        def call(event, **kw):
            result = getattr(callback, event)(args, state, control, **extras, **kw)
            return control if result is None else result

        kept = []
        control = call("on_init_end")
        control = call("on_train_begin")
        control = call("on_epoch_begin")
        for _ in range(steps):
            control = call("on_step_begin")
            for i in range(accumulation):
                micro_batch(model, accumulation)
                if i < accumulation - 1:
                    control = call("on_substep_end")
            opt.step()
            model.zero_grad(set_to_none=True)
            if leak:
                kept.append(torch.zeros(leak // 4))
            state.global_step += 1
            control = call("on_step_end")
            control = call("on_log", logs={"loss": 0.0})
        control = call("on_epoch_end")
        control = call("on_train_end")
        return control

    def test_reads_once_per_optimizer_step(self):
        callback = memplan.integrations.HFCallback()  # device from TrainingArguments.device at on_train_begin
        steps = []
        original = memplan.Monitor.step

        def spy(monitor, i):
            steps.append(i)
            return original(monitor, i)

        memplan.Monitor.step = spy
        try:
            self.run_loop(callback, steps=6, accumulation=3)
        finally:
            memplan.Monitor.step = original
        self.assertEqual(steps, [1, 2, 3, 4, 5, 6])
        self.assertEqual(callback.monitor.device, "cpu")
        self.assertIsNone(callback.last.leak)
        self.assertEqual(callback.last.band, "normal")

    def test_flags_a_leak(self):
        callback = memplan.integrations.HFCallback(device="cpu")
        self.run_loop(callback, steps=9, accumulation=2, leak=MIB)
        self.assertIsNotNone(callback.last.leak)
        self.assertAlmostEqual(callback.last.leak["rate_bytes_per_step"], MIB, delta=0.01 * MIB)

    def test_stop_on_emergency(self):
        callback = memplan.integrations.HFCallback(device="cpu", stop_on_emergency=True,
                                                   thresholds={"warning": 1e-7, "critical": 2e-7, "emergency": 3e-7})
        control = self.run_loop(callback, steps=1, accumulation=1)
        self.assertTrue(control.should_training_stop)
        self.assertTrue(control.should_save)

    def test_bad_device_fails_before_training(self):
        with self.assertRaises(memplan.InputError):
            memplan.integrations.HFCallback(device="cuda:3")


class LightningOrder(unittest.TestCase):
    def run_loop(self, callback, batches, accumulate, leak=0):
        model, opt = model_and_optimizer()
        pl_module = types.SimpleNamespace(device=torch.device("cpu"))
        trainer = types.SimpleNamespace(global_step=0, accumulate_grad_batches=accumulate)
        kept = []
        for hook in ("setup", "on_fit_start", "on_train_start", "on_train_epoch_start"):
            args = (trainer, pl_module, "fit") if hook == "setup" else (trainer, pl_module)
            getattr(callback, hook)(*args)
        for batch_idx in range(batches):
            callback.on_train_batch_start(trainer, pl_module, None, batch_idx)
            micro_batch(model, accumulate)
            steps_now = (batch_idx + 1) % accumulate == 0
            if steps_now:
                callback.on_before_optimizer_step(trainer, pl_module, opt)
                opt.step()
                callback.on_before_zero_grad(trainer, pl_module, opt)
                opt.zero_grad(set_to_none=True)
                trainer.global_step += 1
                if leak:
                    kept.append(torch.zeros(leak // 4))
            callback.on_train_batch_end(trainer, pl_module, {"loss": 0.0}, None, batch_idx)
        for hook in ("on_train_epoch_end", "on_train_end", "on_fit_end"):
            getattr(callback, hook)(trainer, pl_module)
        callback.teardown(trainer, pl_module, "fit")

    def test_reads_once_per_optimizer_step(self):
        callback = memplan.integrations.LightningCallback()
        seen = []
        original = memplan.Monitor.step
        memplan.Monitor.step = lambda monitor, i: seen.append(i) or original(monitor, i)
        try:
            self.run_loop(callback, batches=12, accumulate=4)
        finally:
            memplan.Monitor.step = original
        self.assertEqual(seen, [1, 2, 3])
        self.assertIsNone(callback.last.leak)

    def test_flags_a_leak(self):
        callback = memplan.integrations.LightningCallback(device="cpu")
        self.run_loop(callback, batches=20, accumulate=2, leak=MIB)
        self.assertIsNotNone(callback.last.leak)


if __name__ == "__main__":
    unittest.main()
