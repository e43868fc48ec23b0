"""memplan.Monitor: device memory read once per optimizer step, inside the training loop.

Each step() reads the device (CUDA: torch's caching-allocator statistics plus NVML or
cudaMemGetInfo for what lives outside the allocator; CPU: the exact bytes of live tensors through
memplan's counting allocator, or the process's resident memory when that cannot be installed),
and returns a Status: used, reserved, the peak of this step, utilization and its band (0.90 /
0.92 / 0.95 / 0.97 by default), fragmentation, growth at the same point of successive steps (a
leak, with its rate), the first step whose peak departs from memplan's estimate (with the term
most likely responsible) and, on critical, what memplan fit recommends. A reading that fails never
raises inside the training loop: the status carries the error and the monitor logs it.

The JSON-lines log (schema memplan.monitor/v1, docs/monitor-log.md) is what `memplan watch
--replay FILE` and read_log() read back.
"""

import json
import logging
import math
import os
import stat
import time

from . import _memplan
from ._commands import InputError

__all__ = ["Monitor", "Status", "install_cpu_counter", "read_log", "SCHEMA", "DEFAULT_THRESHOLDS", "band_of"]

SCHEMA = "memplan.monitor/v1"
# The memory guides' bands (DESIGN.md "Memory thresholds"): target is fit's goal, the others name
# the status of a reading. The defaults are the estimator's (estimator/setup.h Thresholds).
DEFAULT_THRESHOLDS = dict(_memplan.default_thresholds)
_THRESHOLDS_HINT = "thresholds={{'warning': {warning}, 'critical': {critical}, 'emergency': {emergency}}}".format(**DEFAULT_THRESHOLDS)
# The bands from the least to the most full, as the estimator names them (estimator/breakdown.h).
BANDS = tuple(_memplan.bands)
GIB = 1024 ** 3
# Terms that exist only on a CUDA device; a CPU reading is compared with the estimate without them.
_CUDA_ONLY_TERMS = ("cuda_context", "workspace", "allocator_overhead")
_STATE_TERMS = ("weights", "master_weights", "optimizer_states", "gradients")
_DYNAMIC_TERMS = ("activations", "logits_and_loss", "transient")

_logger = logging.getLogger("memplan.monitor")


def band_of(utilization, thresholds=DEFAULT_THRESHOLDS):
    """The band of a fraction of device memory: normal (up to the target), above_target, warning,
    critical, emergency, out_of_memory (past 1.0); the estimator's own definition, so a reading and
    `memplan estimate` name the same band for the same fraction."""
    t = thresholds
    return _memplan.band_of(utilization, t["target"], t["warning"], t["critical"], t["emergency"])


def _pair(used, total):
    """``18.5/24.0 GiB``, or ``212.4 MiB/23.5 GiB`` below 1 GiB."""
    if used >= GIB or used == 0:
        return f"{used / GIB:.1f}/{total / GIB:.1f} GiB"
    return f"{used / 2**20:.1f} MiB/{total / GIB:.1f} GiB"


# ---- readers -----------------------------------------------------------------------------------


def install_cpu_counter():
    """Makes memplan's counting allocator torch's CPU allocator, so a CPU Monitor reads the exact
    bytes of live tensors. Call it before building the model: tensors made earlier are not counted.
    Returns True when installed, False when this build has no counter (the monitor then reads the
    process's resident memory)."""
    try:
        import torch  # noqa: F401  (loads the libc10 the counter attaches to)
        from . import _memplan_torch
    except ImportError:
        return False
    if not _memplan_torch.installed():
        _memplan_torch.install()
    return True


def _host_capacity():
    # MemTotal, or the cgroup's limit when it is lower (a container).
    total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
            if text.isdigit() and 0 < int(text) < total:
                total = int(text)
        except OSError:
            pass
    return total


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class _Reading:
    def __init__(self, allocated, reserved, peak, peak_reserved, used, peak_used):
        self.allocated = allocated          # tensor bytes alive now
        self.reserved = reserved            # held by the allocator now
        self.peak = peak                    # tensor bytes at this step's peak
        self.peak_reserved = peak_reserved  # held by the allocator at this step's peak
        self.used = used                    # device-wide (CUDA) / process (CPU) bytes now
        self.peak_used = peak_used          # the same at this step's peak (what runs out)


class _CpuCounterReader:
    """Exact bytes of live CPU tensors (memplan's counting allocator); no cache, so reserved ==
    allocated."""

    kind = "cpu-counter"

    def __init__(self, module):
        self.m = module
        self.name = "cpu"
        self.capacity = _host_capacity()
        self.notes = ["counting allocator: exact bytes of CPU tensors made after it was installed"]

    def reset_peak(self):
        self.m.reset_peak()

    def read(self):
        now, peak = self.m.current_bytes(), self.m.peak_bytes()
        self.m.reset_peak()
        return _Reading(now, now, peak, peak, now, peak)


class _RssReader:
    """The process's resident memory (/proc/self): the fallback when no counter can be installed.
    It includes the interpreter, libraries and allocator caches, so it is not comparable term by
    term with an estimate."""

    kind = "process-rss"

    def __init__(self, why):
        self.name = "cpu"
        self.capacity = _host_capacity()
        self.notes = [f"process resident memory (RSS), not tensor bytes: {why}"]
        self.can_reset = True

    def reset_peak(self):
        # Writing 5 to clear_refs resets the peak RSS (VmHWM) of the process (Linux >= 4.0).
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            self.can_reset = False

    def read(self):
        now = _rss_bytes()
        peak = max(now, _hwm_bytes()) if self.can_reset else now
        self.reset_peak()
        return _Reading(now, now, peak, peak, now, peak)


class _CudaReader:
    """torch's caching-allocator statistics for one device, plus device-wide use from NVML (or
    cudaMemGetInfo without NVML) for what lives outside the allocator (context, cuBLAS, NCCL)."""

    kind = "cuda"

    def __init__(self, torch, index):
        from . import _nvml

        self.torch = torch
        self.index = index
        props = torch.cuda.get_device_properties(index)
        self.name = props.name
        self.capacity = props.total_memory
        self.notes = []
        self.nvml = None
        try:
            self.nvml = _nvml.device_for_cuda_index(index)
        except _nvml.NvmlError as e:
            self.notes.append(f"NVML not used ({e}); device-wide use from cudaMemGetInfo")

    def _device_used(self):
        if self.nvml is not None:
            try:
                return self.nvml.memory_used()
            except Exception as e:  # a driver hiccup must not stop training
                self.notes.append(f"NVML read failed ({e}); device-wide use from cudaMemGetInfo")
                self.nvml = None
        free, total = self.torch.cuda.mem_get_info(self.index)
        return total - free

    def reset_peak(self):
        self.torch.cuda.reset_peak_memory_stats(self.index)

    def read(self):
        c = self.torch.cuda
        allocated, reserved = c.memory_allocated(self.index), c.memory_reserved(self.index)
        peak, peak_reserved = c.max_memory_allocated(self.index), c.max_memory_reserved(self.index)
        used = self._device_used()
        c.reset_peak_memory_stats(self.index)
        outside = max(0, used - reserved)  # context, cuBLAS/NCCL buffers, other processes
        return _Reading(allocated, reserved, peak, peak_reserved, used, peak_reserved + outside)


def _reader_for(device):
    text = str(device)
    if text == "cpu":
        try:
            import torch  # noqa: F401
        except ImportError:
            return _RssReader("torch is not importable")
        if install_cpu_counter():
            from . import _memplan_torch
            return _CpuCounterReader(_memplan_torch)
        return _RssReader("this memplan was built without the counting allocator (_memplan_torch)")
    if text == "cuda" or text.startswith("cuda:"):
        try:
            import torch
        except ImportError:
            raise InputError(f"device '{text}' needs torch, which this Python cannot import", flag="device",
                             keyword="device", hint="install PyTorch with CUDA, or monitor device='cpu'") from None
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = torch.cuda.current_device() if text == "cuda" and count else None
        if text.startswith("cuda:"):
            try:
                index = int(text[5:])
            except ValueError:
                raise InputError(f"cannot read '{text}' as a device", flag="device", keyword="device",
                                 hint="device='cuda:0', 'cuda' or 'cpu'") from None
        if count == 0:
            raise InputError(f"device '{text}' does not exist: torch sees no CUDA device here", flag="device",
                             keyword="device", hint="monitor device='cpu', or check the driver and CUDA_VISIBLE_DEVICES")
        if index is None or not 0 <= index < count:
            devices = ", ".join(f"cuda:{i}" for i in range(count))
            raise InputError(f"device '{text}' does not exist: torch sees {count} CUDA device{'s' if count > 1 else ''} ({devices})",
                             flag="device", keyword="device", hint="pick one of those (CUDA_VISIBLE_DEVICES renumbers them)")
        return _CudaReader(torch, index)
    raise InputError(f"cannot monitor device '{text}'", flag="device", keyword="device",
                     hint="device='cuda:N', 'cuda' or 'cpu'")


# ---- status --------------------------------------------------------------------------------------


class Status:
    """One step's reading and what the monitor concluded from it (see Monitor.step)."""

    FIELDS = ("step", "t", "device", "source", "allocated_bytes", "reserved_bytes", "peak_bytes",
              "peak_reserved_bytes", "used_bytes", "peak_used_bytes", "capacity_bytes", "utilization", "band",
              "fragmentation", "fragmentation_bytes", "leak", "departure", "recommendation", "events", "error")

    def __init__(self, **fields):
        for name in self.FIELDS:
            setattr(self, name, fields.get(name))
        if self.events is None:
            self.events = []

    def to_dict(self):
        return {name: getattr(self, name) for name in self.FIELDS}

    def line(self):
        """``[step 100] Memory: 18.5/24.0 GiB (77%), Status: normal`` and what happened."""
        if self.error:
            return f"[step {self.step}] memory reading failed: {self.error}"
        text = (f"[step {self.step}] Memory: {_pair(self.peak_used_bytes, self.capacity_bytes)} "
                f"({100 * self.utilization:.0f}%), Status: {self.band}")
        if self.fragmentation:
            text += f", fragmentation {100 * self.fragmentation:.0f}%"
        if self.leak:
            text += f", growing {self.leak['rate_bytes_per_step'] / 2**20:.1f} MiB/step since step {self.leak['since_step']}"
        if self.departure and "departure" in self.events:
            d = self.departure
            text += f", {100 * d['error']:+.1f}% against the estimate (likely {d['term']})"
        if self.recommendation and "recommendation" in self.events and self.recommendation.get("flags"):
            text += f"; memplan fit: {self.recommendation['flags']}"
        return text

    def __repr__(self):
        return f"Status({self.line()})"


# ---- the monitor ---------------------------------------------------------------------------------


def _check_thresholds(t):
    for key in ("target", "warning", "critical", "emergency"):
        v = t.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v <= 1:
            raise InputError(f"threshold '{key}' must be a fraction in (0, 1] (got {v!r})", flag="thresholds",
                             keyword="thresholds", hint=_THRESHOLDS_HINT)
    if not t["warning"] < t["critical"] < t["emergency"]:
        raise InputError(f"thresholds must rise: warning {t['warning']} < critical {t['critical']} < emergency {t['emergency']}",
                         flag="thresholds", keyword="thresholds", hint="the defaults are {warning}, {critical} and {emergency}".format(**DEFAULT_THRESHOLDS))


def _setup_keywords(doc):
    """memplan.fit keywords for the setup of an estimate document.

    A memplan.estimate() document carries its call's keywords (EstimateDocument.keywords): those,
    exactly. A ``memplan estimate --json`` document (or a copy of one) gives the flags its
    ``sources`` name: each registry row with a flag (_memplan.setup_paths()) whose source is that
    flag or its negation, with the value its setup shows, the card of a --gpu flag, and the model
    by its name (a preset or a Hub id: a model file's path is not in the document). Not in it:
    what a --config file stated, the sizes and the calibration (pass setup= for such a run). Values
    only a default chose are left to fit's own defaults: an explicit default can narrow fit's
    search (--no-liger keeps Liger's kernels out of it).
    """
    if isinstance(getattr(doc, "keywords", None), dict):
        return dict(doc.keywords)
    s = doc["setup"]
    sources = s["sources"]
    kw = {"model": s["model"]["name"]}
    for flag, path, place, negation in _memplan.setup_paths():
        if sources.get(path) not in (flag, negation or flag):
            continue
        value = doc
        for part in place.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and not isinstance(value, dict):
            kw[flag[2:].replace("-", "_")] = value
    return kw


class Monitor:
    """Reads device memory once per optimizer step and says how it stands.

    device: "cuda:N", "cuda" or "cpu" (a device that does not exist raises InputError here, before
    training). estimate: a memplan.estimate() document to compare with (or None). setup: the
    memplan.estimate keywords of this run (model=, micro_batch=, ...); when given, the estimate is
    computed from them and a critical reading gets memplan fit's recommendation. thresholds: the
    bands as fractions of device memory (defaults 0.90/0.92/0.95/0.97, or the estimate's).
    tolerance: relative departure from the estimate that is reported (0.10). leak_window: steps of
    growth that make a leak (4), after warmup_steps (2: step 1 creates the optimizer state).
    leak_min_bytes_per_step: smaller growth is noise (64 KiB; 1 MiB when reading RSS). log: a
    path for the memplan.monitor/v1 JSON lines ("x": refuse an existing file, "a" appends).
    capacity: device memory in bytes, overriding what the device reports. logger: where each
    step's line goes (logging.getLogger("memplan.monitor"): INFO when normal, WARNING otherwise).

    On CPU, create the monitor (or call memplan.install_cpu_counter()) before building the model:
    the counting allocator counts tensors made after it is installed.
    """

    def __init__(self, device="cuda:0", estimate=None, thresholds=None, setup=None, tolerance=0.10,
                 leak_window=4, warmup_steps=2, leak_min_bytes_per_step=None, log=None, log_mode="x",
                 capacity=None, logger=None):
        self._log = logger or _logger
        if setup is not None and not isinstance(setup, dict):
            raise InputError("setup takes a dict of memplan.estimate keywords", flag="setup", keyword="setup",
                             hint="setup=dict(model='gpt2', micro_batch=4, seq_len=1024)")
        if estimate is None and setup is not None:
            from ._commands import estimate as run_estimate
            estimate = run_estimate(**setup)
        if estimate is not None and (not isinstance(estimate, dict) or "per_gpu" not in estimate):
            raise InputError("estimate takes the document memplan.estimate() returns", flag="estimate",
                             keyword="estimate", hint="estimate=memplan.estimate(model=..., micro_batch=..., seq_len=...)")
        self.estimate = estimate
        self.setup = setup
        t = dict(DEFAULT_THRESHOLDS)
        if estimate is not None and isinstance(estimate.get("setup", {}).get("thresholds"), dict):
            t.update(estimate["setup"]["thresholds"])
        if thresholds is not None:
            if not isinstance(thresholds, dict):
                raise InputError("thresholds takes a dict of fractions", flag="thresholds", keyword="thresholds",
                                 hint=_THRESHOLDS_HINT)
            unknown = set(thresholds) - set(DEFAULT_THRESHOLDS)
            if unknown:
                raise InputError(f"unknown threshold '{sorted(unknown)[0]}'", flag="thresholds", keyword="thresholds",
                                 hint="thresholds are target, warning, critical and emergency")
            t.update(thresholds)
        _check_thresholds(t)
        self.thresholds = t
        self.tolerance = tolerance
        self.leak_window = max(2, int(leak_window))
        self.warmup_steps = max(0, int(warmup_steps))
        self.reader = _reader_for(device)
        self.device = str(device)
        if leak_min_bytes_per_step is None:
            leak_min_bytes_per_step = 2**20 if self.reader.kind == "process-rss" else 64 * 1024
        self.leak_min = leak_min_bytes_per_step
        self.capacity = int(capacity) if capacity else self.reader.capacity
        self.notes = list(self.reader.notes)
        self._history = []        # (step, allocated) at the step() point, after warmup
        self._departure = None
        self._leak = None
        self._worst_band = "normal"
        self._recommended_band = None
        self.peak = None          # the Status with the highest peak so far
        self.statuses = 0
        self._out = None
        if log is not None:
            if log_mode not in ("x", "a", "w"):
                raise InputError(f"log_mode '{log_mode}' is not one of x, a, w", flag="log_mode", keyword="log_mode",
                                 hint="'x' refuses an existing file, 'a' appends, 'w' replaces")
            try:
                self._out = open(log, log_mode, encoding="utf-8")
            except FileExistsError:
                raise InputError("the log file exists already", file=str(log),
                                 hint="pick another name, or log_mode='a' to append, 'w' to replace") from None
            except OSError as e:
                raise InputError(f"cannot write the log: {e.strerror}", file=str(log)) from None
        self._start = time.monotonic()
        self.reader.reset_peak()
        self._write({"kind": "start", "source": "monitor", "time": time.time(), "device": self.device,
                     "device_name": self.reader.name, "reader": self.reader.kind, "capacity_bytes": self.capacity,
                     "thresholds": self.thresholds, "tolerance": self.tolerance, "notes": self.notes,
                     "estimate": self._estimate_summary()})

    # -- public ------------------------------------------------------------------------------------

    def start(self):
        """Starts the first step's peak now (a callback calls it when training begins)."""
        try:
            self.reader.reset_peak()
        except Exception as e:
            self._log.warning("memplan monitor: cannot reset the peak: %s", e)

    def step(self, i):
        """Reads the device after optimizer step i and returns its Status. Never raises."""
        try:
            status = self._step(i)
        except Exception as e:  # the training loop must go on
            status = Status(step=i, t=time.monotonic() - self._start, device=self.device, source=self.reader.kind,
                            error=f"{type(e).__name__}: {e}")
            try:
                self._log.warning("memplan monitor: %s", status.line())
            except Exception:
                pass
        try:
            self._write(dict(kind="step", **status.to_dict()))
        except Exception as e:
            self._log.warning("memplan monitor: cannot write the log: %s", e)
        return status

    def close(self):
        """Writes the log's end record and closes it."""
        if self._out is None:
            return
        peak = self.peak
        self._write({"kind": "end", "t": time.monotonic() - self._start, "steps": self.statuses,
                     "peak_bytes": peak.peak_used_bytes if peak else None, "peak_step": peak.step if peak else None,
                     "worst_band": self._worst_band, "leak": self._leak, "departure": self._departure})
        self._out.close()
        self._out = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    def _write(self, record):
        if self._out is not None:
            self._out.write(json.dumps(dict(schema=SCHEMA, **record)) + "\n")
            self._out.flush()

    def _estimate_summary(self):
        if self.estimate is None:
            return None
        pg = self.estimate["per_gpu"]
        return {"peak_bytes": pg["peak_bytes"], "comparable_peak_bytes": self._comparable_estimate(),
                "peak_phase": pg.get("peak_phase"), "terms": {t["name"]: t["bytes"] for t in pg["terms"]}}

    def _terms(self):
        return {t["name"]: t["bytes"] for t in self.estimate["per_gpu"]["terms"]}

    def _comparable_estimate(self):
        # A CPU reading counts tensors: leave out what only a CUDA device has.
        total = self.estimate["per_gpu"]["peak_bytes"]
        if self.reader.kind != "cuda":
            terms = self._terms()
            total -= sum(terms.get(n, 0) for n in _CUDA_ONLY_TERMS)
        return total

    def _step(self, i):
        r = self.reader.read()
        t = time.monotonic() - self._start
        self.statuses += 1
        cap = self.capacity
        util = r.peak_used / cap if cap else 0.0
        band = band_of(util, self.thresholds)
        frag_bytes = max(0, r.reserved - r.allocated)
        frag = frag_bytes / r.reserved if self.reader.kind == "cuda" and r.reserved else None
        events = []
        if BANDS.index(band) > BANDS.index(self._worst_band):
            events.append(f"band:{band}")
            self._worst_band = band
        leak = self._check_leak(i, r)
        if leak and self._leak is None:
            events.append("leak")
        self._leak = leak
        if self._departure is None and self.estimate is not None and self.statuses > self.warmup_steps:
            self._departure = self._check_departure(i, r)
            if self._departure:
                events.append("departure")
        status = Status(step=i, t=t, device=self.device, source=self.reader.kind, allocated_bytes=r.allocated,
                        reserved_bytes=r.reserved, peak_bytes=r.peak, peak_reserved_bytes=r.peak_reserved,
                        used_bytes=r.used, peak_used_bytes=r.peak_used, capacity_bytes=cap, utilization=util,
                        band=band, fragmentation=frag, fragmentation_bytes=frag_bytes, leak=leak,
                        departure=self._departure, events=events)
        if band in ("critical", "emergency", "out_of_memory") and self._recommended_band != band:
            self._recommended_band = band
            status.recommendation = self._recommend(r)
            events.append("recommendation")
        if self.peak is None or r.peak_used > self.peak.peak_used_bytes:
            self.peak = status
        if events or BANDS.index(band) >= BANDS.index("warning"):
            self._log.warning("memplan monitor: %s", status.line())
        else:
            self._log.info("memplan monitor: %s", status.line())
        return status

    def _check_leak(self, i, r):
        # The step() point is the same point of every step: what is alive there should not grow.
        if self.statuses <= self.warmup_steps:
            return None
        self._history.append((i, r.allocated))
        self._history = self._history[-(self.leak_window + 1):]
        if len(self._history) <= self.leak_window:
            return None
        values = [a for _, a in self._history]
        deltas = [b - a for a, b in zip(values, values[1:])]
        growing = sum(1 for d in deltas if d > 0)
        if any(d < 0 for d in deltas) or growing < math.ceil(0.75 * len(deltas)):
            return None
        # Least-squares slope over the window, bytes per step.
        steps = [s for s, _ in self._history]
        n = len(steps)
        ms, mv = sum(steps) / n, sum(values) / n
        den = sum((s - ms) ** 2 for s in steps) or 1
        rate = sum((s - ms) * (v - mv) for s, v in zip(steps, values)) / den
        if rate < self.leak_min:
            return None
        since = self._leak["since_step"] if self._leak else self._history[0][0]
        left = self.thresholds["critical"] * self.capacity - r.peak_used
        return {"rate_bytes_per_step": rate, "since_step": since, "growth_bytes": values[-1] - values[0],
                "window_steps": n - 1,
                "steps_to_critical": max(0, int(left / rate)) if rate > 0 else None}

    def _check_departure(self, i, r):
        est = self._comparable_estimate()
        measured = r.peak_used if self.reader.kind == "cuda" else r.peak
        if est <= 0:
            return None
        err = (measured - est) / est
        if abs(err) <= self.tolerance:
            return None
        term, why = self._likely_term(r, measured - est)
        return {"step": i, "measured_bytes": measured, "estimated_bytes": est, "error": err, "term": term, "why": why}

    def _likely_term(self, r, diff):
        terms = self._terms()
        # Between steps the model states are what is alive: compare them first (with and without
        # gradients, which zero_grad may or may not have freed).
        states = sum(terms.get(n, 0) for n in ("weights", "master_weights", "optimizer_states"))
        resident = [states, states + terms.get("gradients", 0)]
        if self.reader.kind == "cuda":
            resident = [x + terms.get("comm_buffers", 0) for x in resident]
        res_diff = min((r.allocated - x for x in resident), key=abs)
        if abs(res_diff) > 0.5 * abs(diff):
            name = min(_STATE_TERMS, key=lambda n: abs(abs(res_diff) - terms.get(n, 0)) if terms.get(n, 0) else math.inf)
            return name, (f"between steps {r.allocated:,} B are alive against {min(resident, key=lambda x: abs(r.allocated - x)):,} B "
                          f"of estimated model states ({res_diff:+,} B): {name} is the closest term")
        if self.reader.kind == "cuda" and r.peak_reserved - r.peak > 0.5 * abs(diff):
            return "allocator_overhead", (f"the allocator held {r.peak_reserved - r.peak:,} B more than the tensors at the peak "
                                          "(fragmentation)")
        name = max(_DYNAMIC_TERMS, key=lambda n: terms.get(n, 0))
        return name, (f"the model states match between steps; the {diff:+,} B are in what the step allocates and frees, "
                      f"where {name} is the largest term")

    def _recommend(self, r):
        """memplan fit's answer for the capacity left once the measured excess over the estimate is
        taken off: the micro-batch and accumulation that keep the effective batch and fit."""
        try:
            if self.setup is not None:
                kw = dict(self.setup)
            elif self.estimate is not None:
                kw = _setup_keywords(self.estimate)
            else:
                return {"error": "no setup: pass setup= (the memplan.estimate keywords) or estimate= for a recommendation from fit"}
            from ._commands import estimate as run_estimate
            from ._commands import fit as run_fit
            excess = 0
            if self.estimate is not None:
                excess = max(0, r.peak_used - self.estimate["per_gpu"]["peak_bytes"])
            kw["gpu_memory"] = f"{max(1, self.capacity - excess)}B"  # bytes, with the unit memplan requires
            doc = run_fit(**kw)
            mb = doc["setup"]["batch"]["micro_batch"]
            accum = doc["setup"]["batch"]["grad_accum"]
            effective = mb * accum
            largest = doc["largest_micro_batch"]
            rec = {"from": "memplan fit", "capacity_bytes": self.capacity, "measured_excess_bytes": excess,
                   "effective_batch": effective, "largest_micro_batch": largest}
            limit = min(largest, mb - 1) if mb > 1 else largest
            choice = max((d for d in range(1, limit + 1) if effective % d == 0), default=0) if limit >= 1 else 0
            if choice:
                new = dict(kw, micro_batch=choice, grad_accum=effective // choice)
                peak = run_estimate(**new)["per_gpu"]["peak_bytes"] + excess
                rec.update(micro_batch=choice, grad_accum=effective // choice,
                           flags=f"--micro-batch {choice} --grad-accum {effective // choice}", peak_bytes=peak)
            else:
                fitting = [c for c in doc.get("single", []) if c.get("fits")]
                fitting += [dict(o, cost="; ".join(c["what"] for c in o["changes"])) for o in doc.get("options", [])]
                if fitting:
                    rec.update(flags=fitting[0]["flags"], peak_bytes=fitting[0]["peak_bytes"] + excess, cost=fitting[0]["cost"])
                else:
                    rec["error"] = "memplan fit finds no change that fits this device"
            return rec
        except Exception as e:
            return {"error": f"memplan fit failed: {e}"}


# ---- reading logs back ---------------------------------------------------------------------------


# The longest line read_log takes: a record is a few hundred bytes (a reading, a verdict); a line
# past this is not one, and reading it whole could take all of memory.
MAX_LOG_LINE = 1 << 20


def read_log(path):
    """The records of a memplan.monitor/v1 JSON-lines log (Monitor or `memplan watch --log`), as
    dicts. InputError with file:line:col on a line that is not one, and on a path that is not a
    regular file (a FIFO would block the reader, /dev/zero fill its memory)."""
    records = []
    not_regular = InputError("not a regular file (a FIFO, a device or a folder)", file=str(path),
                             hint="read_log reads a log file memplan wrote; stream a live run with memplan watch instead")
    try:  # opened without blocking, so that a FIFO is refused rather than waited on
        f = open(path, encoding="utf-8", opener=lambda p, flags: os.open(p, flags | getattr(os, "O_NONBLOCK", 0)))
    except IsADirectoryError:
        raise not_regular from None
    except OSError as e:
        raise InputError(f"cannot open the log: {e.strerror}", file=str(path),
                         hint="a memplan.monitor/v1 log written by memplan.Monitor(log=...) or memplan watch --log") from None
    with f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise not_regular
        number = 0
        while True:
            line = f.readline(MAX_LOG_LINE + 1)
            if not line:
                break
            number += 1
            if len(line) > MAX_LOG_LINE:
                raise InputError(f"a line longer than {MAX_LOG_LINE} characters", file=str(path), line=number, col=1,
                                 hint="a memplan.monitor/v1 log has one short JSON object per line")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"not a JSON line: {e.msg}", file=str(path), line=number, col=e.colno,
                                 hint="a memplan.monitor/v1 log has one JSON object per line") from None
            if not isinstance(record, dict) or record.get("schema") != SCHEMA:
                raise InputError(f"not a {SCHEMA} record", file=str(path), line=number, col=1,
                                 hint="memplan.Monitor(log=...) and memplan watch --log write these files")
            records.append(record)
    return records
