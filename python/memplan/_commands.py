"""setup(), estimate(), fit() and plan(): memplan's library with the CLI's flags as keywords.

Each keyword argument is the CLI flag of the same name (``micro_batch=4`` is ``--micro-batch 4``),
read by the flags the CLI declares (api/flags.h); the compiled core (python/_memplan.cpp) builds
the setup and runs the estimator and planner, and the documents ``memplan COMMAND --json`` prints
come back as Python objects, with no text in between. ``setup()`` returns the setup itself, whose
``estimate()`` is the per-GPU Breakdown. Bad input raises InputError with the CLI's message,
location and hint. Nothing here computes memory.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import warnings

from . import _memplan

__all__ = ["InputError", "ConfigWarning", "Setup", "Breakdown", "EstimateDocument", "setup", "estimate", "fit", "plan", "flags"]

# The library's setup and per-GPU breakdown (python/_memplan.cpp).
Setup = _memplan.Setup
Breakdown = _memplan.Breakdown

# Flags a function does not take as keywords: CLI11's own --help.
_NOT_KEYWORDS = {"help"}


class InputError(ValueError):
    """Bad input: the message, where it came from and a hint, as the CLI prints them.

    Attributes: ``message``, ``file``, ``line``, ``col`` (1-based; 0 when none), ``flag`` (the
    CLI flag, e.g. ``--micro-batch``, when the value came from a keyword argument), ``keyword``
    (that keyword argument, e.g. ``micro_batch``), ``hint``. ``str(error)`` is the CLI's text.
    """

    def __init__(self, message, file="", line=0, col=0, flag="", hint="", keyword=""):
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.flag = flag
        self.hint = hint
        self.keyword = keyword or (flag[2:].replace("-", "_") if flag.startswith("--") else "")
        super().__init__(self.render())

    @property
    def location(self):
        """``file:line:col``, ``file``, ``--flag`` or ``""`` (the CLI's Where::str)."""
        if self.file:
            if self.line > 0 and self.col > 0:
                return f"{self.file}:{self.line}:{self.col}"
            if self.line > 0:
                return f"{self.file}:{self.line}"
            return self.file
        return self.flag

    def render(self):
        """The CLI's two lines: ``LOCATION: error: MESSAGE`` and ``hint: HINT``."""
        if self.file:
            text = f"{self.location}: error: {self.message}"
        elif self.flag:
            text = f"error: {self.flag}: {self.message}"
        else:
            text = f"error: {self.message}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text

    def __str__(self):
        return self.render()


class ConfigWarning(UserWarning):
    """A reader warning the CLI prints on stderr (a key one typo away from a known one)."""


_flag_cache = {}
_negation_cache = {}  # command -> {keyword: "--no-NAME"} for the switches that have one


def flags(command):
    """The keyword arguments ``memplan.COMMAND()`` takes: {keyword: (flag, takes a value, help)}."""
    if command not in _flag_cache:
        table, negations = {}, {}
        for names, _type_name, takes_value, description in _memplan.flags(command):
            if names[0] in _NOT_KEYWORDS:
                continue
            key = names[0].replace("-", "_")
            table[key] = ("--" + names[0], takes_value, description)
            if not takes_value and "no-" + names[0] in names:
                negations[key] = "--no-" + names[0]
        _flag_cache[command] = table
        _negation_cache[command] = negations
    return _flag_cache[command]


class EstimateDocument(dict):
    """A ``memplan.estimate/v1`` document (a dict, equal to the CLI's) that remembers the keywords
    of the memplan.estimate() call that made it (``keywords``)."""

    def __init__(self, doc, keywords):
        super().__init__(doc)
        self.keywords = keywords


def _unknown_keyword(command, key, table):
    near = _memplan.nearest(key, sorted(table))
    hint = f"did you mean '{near[0]}'? " if near else ""
    hint += f"memplan.flags('{command}') lists the keyword arguments (the CLI's flags with _ for -)"
    return InputError(f"unknown keyword argument '{key}' for memplan.{command}()", flag=key, keyword=key, hint=hint)


class _Temporaries:
    """Files written for dict arguments; errors pointing into them name the argument instead."""

    def __init__(self):
        self.dir = None
        self.names = {}  # path -> "<model dict>"

    def write(self, keyword, value):
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="memplan-")
        text = json.dumps(value, indent=2) + "\n"
        if keyword == "model":
            # An HF config.json; the folder's name is the model's name in the document.
            stem = str(value.get("_name_or_path", "") or "model").rstrip("/").split("/")[-1] or "model"
            folder = os.path.join(self.dir, re.sub(r"[^A-Za-z0-9._-]", "_", stem))
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "config.json")
        else:
            # DeepSpeed and HF configs are JSON; anything else is memplan YAML (JSON is YAML).
            json_keys = {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "model_type"}
            path = os.path.join(self.dir, "config.json" if json_keys & set(value) else "config.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        self.names[path] = f"<{keyword} dict>"
        return path

    def rename(self, text):
        for path, name in self.names.items():
            text = text.replace(path, name)
        return text

    def close(self):
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _value_text(command, key, flag, value, temps):
    if isinstance(value, bool):
        raise InputError(f"takes a value, not {value}", flag=flag, keyword=key,
                         hint=f"memplan {command} --help shows what {flag} takes")
    if isinstance(value, dict):
        if key not in ("model", "config"):
            raise InputError("takes a value, not a dict", flag=flag, keyword=key,
                             hint="only model= (an HF config) and config= (a training config) take a dict")
        return temps.write(key, value)
    if isinstance(value, (list, tuple, set)):
        return ",".join(str(v) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


# The releases a script's own interpreter runs, for the runtime keys memplan models them by (the
# version registry, estimator/fields.h): only modules the script has already imported (the torch
# that will train, not whatever is installed). (keyword, module, the largest major memplan reads; 0: any)
_INTERPRETER_RUNTIME = tuple((flag[2:].replace("-", "_"), module, max_major) for flag, module, max_major in _memplan.versions())


def _interpreter_versions(command, kwargs, table):
    """{keyword: (major.minor, full version, module)} for the runtime versions a call leaves to
    memplan's defaults while the interpreter has that module imported. A config file may state
    them itself, so nothing is filled when config= is given."""
    if "config" in kwargs:
        return {}
    out = {}
    for key, module, max_major in _INTERPRETER_RUNTIME:
        mod = sys.modules.get(module)
        if key in kwargs or key not in table or mod is None:
            continue
        full = str(getattr(mod, "__version__", "") or "")
        m = re.match(r"(\d{1,3})\.(\d{1,3})", full)
        # Only what memplan reads as a release (a torch major 1-9; else the call's own defaults).
        if m and 1 <= int(m.group(1)) and (max_major == 0 or int(m.group(1)) <= max_major):
            out[key] = (f"{m.group(1)}.{m.group(2)}", full, module)
    return out


def _args(command, kwargs, temps):
    """The call's keywords as the command's flags and values, and the versions filled from the
    interpreter ({keyword: (version, found, module)})."""
    kwargs = dict(kwargs)
    from_interpreter = kwargs.pop("from_interpreter", True)
    table = flags(command)
    filled = _interpreter_versions(command, kwargs, table) if from_interpreter else {}
    kwargs.update({key: v[0] for key, v in filled.items()})
    args = []
    for key, value in kwargs.items():
        if key not in table:
            raise _unknown_keyword(command, key, table)
        flag, takes_value, _ = table[key]
        if value is None:
            continue
        if not takes_value:
            if not isinstance(value, bool):
                raise InputError(f"is a switch: pass True or False (got {value!r})", flag=flag, keyword=key,
                                 hint=f"{key}=True")
            # A switch with a --no- form (liger=False: --no-liger) says so; a plain flag
            # (strict=False) is simply not given.
            if value:
                args.append(flag)
            elif key in _negation_cache[command]:
                args.append(_negation_cache[command][key])
            continue
        args += [flag, _value_text(command, key, flag, value, temps)]
    return args, filled


def _call(command, kwargs, compute):
    """compute(args, filled, renames, warn) for the call's keywords: ``filled`` the versions taken
    from the interpreter as (keyword, version, found, module), ``renames`` the temporary files of
    dict arguments with the names they go by, ``warn(texts)`` issues reader warnings as
    ConfigWarning. The library's InputError becomes memplan.InputError, after the warnings that
    came before it; anything else escaping the library is a bug."""
    temps = _Temporaries()

    def warn(texts):
        # Attributed to the caller's line: the first frame outside the memplan package (the monitor
        # and the callbacks call these functions too).
        frame, level = sys._getframe(1), 2
        while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] == "memplan":
            frame, level = frame.f_back, level + 1
        for text in texts:
            warnings.warn(temps.rename(text), ConfigWarning, stacklevel=level)
    try:
        args, filled = _args(command, kwargs, temps)
        filled = [(key, v[0], v[1], v[2]) for key, v in filled.items()]
        try:
            return compute(args, filled, list(temps.names.items()), warn)
        except _memplan.InputErrorParts as e:
            message, file, line, col, flag, hint, warned = e.args
            warn(warned)
            raise InputError(temps.rename(message), temps.rename(file), line, col, flag, temps.rename(hint)) from None
        except _memplan.InternalError as e:
            raise RuntimeError(f"memplan internal error: {e} (please report this with the arguments)") from e
    finally:
        temps.close()


def _run(command, kwargs):
    caller = f"memplan.{command}()"
    if command == "plan":
        def compute(args, filled, renames, warn):
            doc, warned, _code = _memplan.plan(args, filled, renames)
            warn(warned)
            return doc
    else:
        def compute(args, filled, renames, warn):
            s = _memplan.Setup(command, args, filled, caller, renames)
            warn(s.warnings)  # before fit's own refusal, as the CLI prints them
            return s.estimate().document() if command == "estimate" else s.fit()[0]
    return _call(command, kwargs, compute)


def setup(command="estimate", **kwargs):
    """The training setup memplan builds from the keywords (those of estimate(), or of fit() with
    ``command="fit"``), as a ``memplan.Setup``: ``setup`` is the setup document with each value's
    source, ``warnings`` what the readers warned about (also issued as ConfigWarning),
    ``estimate()`` the per-GPU ``memplan.Breakdown`` (``peak_bytes``, ``terms``, ``phases``,
    ``verdict``, ``band``, ``document()``), ``fit()`` the fit document and its exit code. The
    runtime versions are filled from the interpreter as for estimate(), and its documents say so.

    >>> s = memplan.setup(model="gpt2", micro_batch=1, seq_len=512, gpu="t4")
    >>> s.estimate().band
    'normal'
    """
    if command not in ("estimate", "fit"):
        raise ValueError(f"memplan.setup() builds the setup of estimate or fit, not {command!r}")

    def compute(args, filled, renames, warn):
        s = _memplan.Setup(command, args, filled, "memplan.setup()", renames)
        warn(s.warnings)
        return s
    return _call(command, kwargs, compute)


def estimate(**kwargs):
    """The per-GPU peak of one training step, term by term: ``memplan estimate --json``.

    Keywords are the CLI's flags (``model=``, ``config=``, ``gpu=``, ``gpu_memory=``, ``gpus=``,
    ``micro_batch=``, ``seq_len=``, ``grad_accum=``, ``precision=``, ``optimizer=``,
    ``checkpointing=``, ``attention=``, ``zero=``, ``offload=``, ``finetune=``, ``lora_rank=``, ...;
    ``memplan.flags("estimate")`` lists them). ``model=`` may be a dict holding an HF config.json,
    ``config=`` a dict holding a training config. Returns the ``memplan.estimate/v1`` document.

    Called from a script that has imported torch (or transformers), and given neither
    ``torch_version=`` (``transformers_version=``) nor ``config=``, the estimate is for the release
    that interpreter runs; the document says so in ``notes`` and ``from_interpreter``.
    ``from_interpreter=False`` keeps memplan's defaults. The document is the CLI's (a dict equal to
    it); its ``keywords`` attribute holds the call's own keywords, which ``memplan.Monitor(estimate=
    doc)`` asks fit about.

    >>> memplan.estimate(model="gpt2", micro_batch=1, seq_len=512)["per_gpu"]["peak_bytes"]
    """
    call = dict(kwargs)
    return EstimateDocument(_run("estimate", kwargs), call)


def fit(**kwargs):
    """Does it fit, the largest micro-batch that does, and the changes that make it fit:
    ``memplan fit --json`` (``memplan.fit/v1``). Needs ``gpu=`` or ``gpu_memory=`` (or a config
    naming one). Keywords as for estimate()."""
    return _run("fit", kwargs)


def plan(**kwargs):
    """The configuration with the highest modelled throughput that fits, with runners-up:
    ``memplan plan --json`` (``memplan.plan/v1``). Keywords as for estimate() plus the plan
    flags (``global_batch=``, ``tier=``, ``budget=``, ``optimizers=``, ``precisions=``,
    ``no_offload=True``, ``max_micro_batch=``, ``emit=`` with ``out=``, ``force=True``)."""
    return _run("plan", kwargs)
