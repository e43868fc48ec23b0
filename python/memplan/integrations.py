"""Callbacks that run memplan.Monitor inside the HF Trainer and Lightning.

    from memplan.integrations import HFCallback
    trainer = Trainer(..., callbacks=[HFCallback(device="cuda:0", setup=dict(model="llama-3.2-1b", ...))])

    from memplan.integrations import LightningCallback
    trainer = lightning.Trainer(..., callbacks=[LightningCallback(device="cuda:0")])

On CPU, call memplan.install_cpu_counter() before building the model: a monitor made by a callback
when training begins would not count the tensors that already exist.

Neither framework is imported until its callback class is first used (attribute access on this
module). Each class derives from the framework's callback base when the framework is installed
(transformers.TrainerCallback; lightning.pytorch.Callback or pytorch_lightning.Callback), and
otherwise from a base whose every other hook does nothing, so any loop that calls the framework's
hooks by name can drive it.

When the hooks run (the call order the tests imitate):
- HF Trainer (src/transformers/trainer.py, _inner_training_loop @ v4.52.4): on_train_begin; per
  optimizer step on_step_begin, on_substep_end for each accumulated micro-batch but the last, then
  the optimizer steps, state.global_step += 1 and on_step_end; on_log / on_save / on_evaluate as
  configured; on_train_end. The monitor reads the device in on_step_end.
- Lightning (src/lightning/pytorch/loops/training_epoch_loop.py @ 2.5.0): on_train_start; per batch
  on_train_batch_start, the optimizer hooks when this batch steps, trainer.global_step counts
  optimizer steps, on_train_batch_end; on_train_end. The monitor reads the device in
  on_train_batch_end when global_step moved.
"""

__all__ = ["HFCallback", "LightningCallback"]

_classes = {}


class _NoOpHooks:
    """Stands in for a framework's callback base when the framework is not installed: any hook
    the loop calls (on_*, setup, teardown) does nothing."""

    def __getattr__(self, name):
        if name.startswith("on_") or name in ("setup", "teardown"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


def _monitor(device, monitor, kwargs):
    from .monitor import Monitor

    return monitor if monitor is not None else Monitor(device=device, **kwargs)


def _hf_class():
    try:
        from transformers import TrainerCallback as base
    except ImportError:
        base = _NoOpHooks

    class HFCallback(base):
        """memplan.Monitor for the HF Trainer: one reading per optimizer step (on_step_end).

        device: as Monitor's; None takes TrainingArguments.device when training begins. monitor:
        a Monitor to use instead of making one. stop_on_emergency: ask the Trainer to save and stop
        when a reading reaches the emergency band. Other keywords go to Monitor.
        """

        def __init__(self, device=None, monitor=None, stop_on_emergency=False, **monitor_kwargs):
            self.device = device
            self.stop_on_emergency = stop_on_emergency
            self._kwargs = monitor_kwargs
            self.monitor = monitor
            if monitor is None and device is not None:
                self.monitor = _monitor(device, None, monitor_kwargs)  # a bad device fails here, before training
            self.last = None

        def on_train_begin(self, args, state, control, **kwargs):
            if self.monitor is None:
                self.monitor = _monitor(str(getattr(args, "device", "cpu")), None, self._kwargs)
            self.monitor.start()

        def on_step_end(self, args, state, control, **kwargs):
            self.last = self.monitor.step(state.global_step)
            if self.stop_on_emergency and self.last.band in ("emergency", "out_of_memory"):
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_train_end(self, args, state, control, **kwargs):
            if self.monitor is not None:
                self.monitor.close()

    return HFCallback


def _lightning_class():
    try:
        from lightning.pytorch import Callback as base
    except ImportError:
        try:
            from pytorch_lightning import Callback as base
        except ImportError:
            base = _NoOpHooks

    class LightningCallback(base):
        """memplan.Monitor for Lightning: one reading per optimizer step (on_train_batch_end once
        trainer.global_step has moved). device: as Monitor's; None takes the LightningModule's
        device when training starts. Other keywords go to Monitor."""

        def __init__(self, device=None, monitor=None, **monitor_kwargs):
            self.device = device
            self._kwargs = monitor_kwargs
            self.monitor = monitor
            if monitor is None and device is not None:
                self.monitor = _monitor(device, None, monitor_kwargs)
            self._seen_step = None
            self.last = None

        def on_train_start(self, trainer, pl_module):
            if self.monitor is None:
                self.monitor = _monitor(str(getattr(pl_module, "device", "cpu")), None, self._kwargs)
            self._seen_step = trainer.global_step
            self.monitor.start()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step != self._seen_step:  # an optimizer step happened in this batch
                self._seen_step = trainer.global_step
                self.last = self.monitor.step(trainer.global_step)

        def on_train_end(self, trainer, pl_module):
            if self.monitor is not None:
                self.monitor.close()

    return LightningCallback


def __getattr__(name):
    makers = {"HFCallback": _hf_class, "LightningCallback": _lightning_class}
    if name not in makers:
        raise AttributeError(f"module 'memplan.integrations' has no attribute '{name}'")
    if name not in _classes:
        _classes[name] = makers[name]()
    return _classes[name]
