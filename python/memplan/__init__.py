"""memplan from Python: its setups, estimates, fit and plan (the CLI's flags as keywords), and a live memory monitor.

    import memplan
    doc = memplan.estimate(model="gpt2", micro_batch=1, seq_len=512)   # memplan estimate --json
    doc["per_gpu"]["peak_bytes"]
    step = memplan.setup(model="gpt2", micro_batch=1, seq_len=512, gpu="t4").estimate()
    step.peak_bytes, step.terms, step.band                              # the library's breakdown

    monitor = memplan.Monitor(device="cuda:0", estimate=doc)   # before building the model
    for i, batch in enumerate(loader):
        ...; optimizer.step(); optimizer.zero_grad()
        monitor.step(i)                                        # once per optimizer step

Bad input raises memplan.InputError (a ValueError) with the CLI's message, location and hint.
``memplan.integrations`` has callbacks for the HF Trainer and Lightning.
"""

import os as _os


def _data_dir():
    # A pip-installed package carries the data (gpus.yaml, families.yaml, models/) in memplan/data; a build tree's
    # package reads the source tree's profiles/ (written into _build_config.py by CMake).
    here = _os.path.dirname(_os.path.abspath(__file__))
    bundled = _os.path.join(here, "data")
    if _os.path.isfile(_os.path.join(bundled, "gpus.yaml")):
        return bundled
    try:
        from . import _build_config
        return _build_config.DATA_DIR
    except ImportError:
        return ""


# The core finds its data through MEMPLAN_DATA_DIR (profiles/presets.cpp); a value the user set wins.
if not _os.environ.get("MEMPLAN_DATA_DIR") and _data_dir():
    _os.environ["MEMPLAN_DATA_DIR"] = _data_dir()

from ._commands import Breakdown, ConfigWarning, EstimateDocument, InputError, Setup, estimate, fit, flags, plan, setup  # noqa: E402
from ._memplan import version as __version__  # noqa: E402
from .monitor import Monitor, Status, install_cpu_counter, read_log  # noqa: E402
from . import integrations  # noqa: E402,F401  (imports no framework until a callback is used)

__all__ = ["setup", "Setup", "Breakdown", "EstimateDocument", "estimate", "fit", "plan", "flags", "InputError", "ConfigWarning", "Monitor", "Status",
           "install_cpu_counter", "read_log", "integrations", "__version__"]
