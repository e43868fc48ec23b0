"""memplan.estimate / fit / plan against the CLI: the same documents for the bundled examples,
the same errors (message, location, hint), and keyword checking with did-you-mean; memplan.setup()
and its Breakdown, the library's own objects, against the documents and the CLI.

Run by ctest (tests/python/CMakeLists.txt) with PYTHONPATH=build/python and MEMPLAN_BIN=build/memplan.
"""

import glob
import json
import os
import subprocess
import tempfile
import unittest
import warnings

import memplan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("MEMPLAN_BIN", os.path.join(ROOT, "build", "memplan"))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml")))


def cli(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


def comparable(doc):
    # plan's search time is measured, so it differs between any two runs.
    doc = json.loads(json.dumps(doc))
    if "search" in doc:
        doc["search"].pop("seconds", None)
    return doc


class SameAsCli(unittest.TestCase):
    def test_default_thresholds_are_the_estimators(self):
        # The monitor's bands start from the thresholds a default setup has (estimator/setup.h).
        from memplan.monitor import DEFAULT_THRESHOLDS
        doc = memplan.estimate(model="gpt2", micro_batch=1, seq_len=64)
        self.assertEqual(DEFAULT_THRESHOLDS, doc["setup"]["thresholds"])
        self.assertEqual(sorted(DEFAULT_THRESHOLDS), ["critical", "emergency", "target", "warning"])

    def test_examples_exist(self):
        self.assertGreaterEqual(len(EXAMPLES), 5, EXAMPLES)

    def test_bundled_examples(self):
        # Each command on each example: the CLI's --json document, or the CLI's error.
        compared = 0
        for path in EXAMPLES:
            for command in ("estimate", "fit", "plan"):
                with self.subTest(example=os.path.basename(path), command=command):
                    code, out, err = cli(command, "--config", path, "--json")
                    self.assertIn(code, (0, 1, 2), err)
                    if code == 2:
                        with self.assertRaises(memplan.InputError) as caught:
                            getattr(memplan, command)(config=path)
                        # Reader warnings may come first; the error is the end of stderr.
                        self.assertTrue(err.strip().endswith(str(caught.exception)), (err, str(caught.exception)))
                        continue
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", memplan.ConfigWarning)
                        doc = getattr(memplan, command)(config=path)
                    self.assertEqual(comparable(doc), comparable(json.loads(out)))
                    self.assertEqual(doc["schema"], f"memplan.{command}/v1")
                    compared += 1
        self.assertGreaterEqual(compared, 2 * len(EXAMPLES))

    def test_done_criterion(self):
        peak = memplan.estimate(model="gpt2", micro_batch=1, seq_len=512)["per_gpu"]["peak_bytes"]
        code, out, _ = cli("estimate", "--model", "gpt2", "--micro-batch", "1", "--seq-len", "512", "--json")
        self.assertEqual(code, 0)
        self.assertEqual(peak, json.loads(out)["per_gpu"]["peak_bytes"])
        self.assertGreater(peak, 124_439_808 * 4)  # at least the fp32 weights of GPT-2

    def test_flags_as_keywords(self):
        kw = dict(model="llama-3.2-1b", gpu="rtx-4090", micro_batch=2, seq_len=1024, grad_accum=4,
                  precision="amp-bf16", optimizer="adamw", checkpointing="full", attention="sdpa", zero=0,
                  finetune="lora", lora_rank=16, lora_targets=["q", "v"])
        args = ["--model", "llama-3.2-1b", "--gpu", "rtx-4090", "--micro-batch", "2", "--seq-len", "1024",
                "--grad-accum", "4", "--precision", "amp-bf16", "--optimizer", "adamw", "--checkpointing", "full",
                "--attention", "sdpa", "--zero", "0", "--finetune", "lora", "--lora-rank", "16", "--lora-targets", "q,v"]
        for command in ("estimate", "fit"):
            code, out, err = cli(command, *args, "--json")
            self.assertIn(code, (0, 1), err)
            self.assertEqual(getattr(memplan, command)(**kw), json.loads(out))
        code, out, err = cli("plan", *args[:4], "--seq-len", "1024", "--global-batch", "32", "--no-offload", "--json")
        self.assertIn(code, (0, 1), err)
        doc = memplan.plan(model="llama-3.2-1b", gpu="rtx-4090", seq_len=1024, global_batch=32, no_offload=True)
        self.assertEqual(comparable(doc), comparable(json.loads(out)))

    def test_model_dict_is_an_hf_config(self):
        with open(os.path.join(ROOT, "profiles", "models", "gpt2.json")) as f:
            config = json.load(f)
        from_dict = memplan.estimate(model=config, micro_batch=2, seq_len=256)
        from_preset = memplan.estimate(model="gpt2", micro_batch=2, seq_len=256)
        self.assertEqual(from_dict["per_gpu"]["peak_bytes"], from_preset["per_gpu"]["peak_bytes"])
        self.assertEqual(from_dict["model"]["parameters"], 124_439_808)  # GPT-2 with vocab 50257

    def test_config_dict(self):
        config = {"model": {"preset": "gpt2"}, "training": {"micro_batch_size": 2, "seq_len": 256}}
        self.assertEqual(memplan.estimate(config=config)["per_gpu"]["peak_bytes"],
                         memplan.estimate(model="gpt2", micro_batch=2, seq_len=256)["per_gpu"]["peak_bytes"])


class FromInterpreter(unittest.TestCase):
    """A script that has imported torch and transformers gets the estimate for the releases it runs
    (issue 23.3). The modules are stand-ins placed in sys.modules for the test only: memplan reads
    what the script imported, never what is merely installed."""

    def setUp(self):
        import sys
        import types
        self.saved = {name: sys.modules.get(name) for name in ("torch", "transformers")}
        for name, version in (("torch", "2.11.0+cu130"), ("transformers", "5.17.0")):
            mod = types.ModuleType(name)
            mod.__version__ = version
            sys.modules[name] = mod

    def tearDown(self):
        import sys
        for name, mod in self.saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod

    def test_filled_and_said(self):
        doc = memplan.estimate(model="gpt2", micro_batch=1, seq_len=128)
        runtime = doc["setup"]["runtime"]
        self.assertEqual((runtime["torch_version"], runtime["transformers_version"]), ("2.11", "5.17"))
        self.assertEqual(doc["from_interpreter"]["torch_version"], {"version": "2.11", "found": "2.11.0+cu130", "module": "torch"})
        self.assertTrue(any(n.startswith("runtime.torch_version 2.11 from this interpreter's torch 2.11.0+cu130") for n in doc["notes"]))
        code, out, _ = cli("estimate", "--model", "gpt2", "--micro-batch", "1", "--seq-len", "128",
                           "--torch-version", "2.11", "--transformers-version", "5.17", "--json")
        self.assertEqual(code, 0)
        self.assertEqual(doc["per_gpu"]["peak_bytes"], json.loads(out)["per_gpu"]["peak_bytes"])

    def test_setup_says_so_too(self):
        s = memplan.setup(model="gpt2", micro_batch=1, seq_len=128)
        b = s.estimate()
        doc = b.document()
        self.assertEqual(doc["setup"]["runtime"]["torch_version"], "2.11")
        self.assertEqual(doc["from_interpreter"]["torch_version"]["found"], "2.11.0+cu130")
        self.assertTrue(any(n.startswith("runtime.torch_version 2.11 from this interpreter's torch 2.11.0+cu130 (memplan.setup() filled it")
                            for n in doc["notes"]), doc["notes"])
        self.assertEqual(b.notes, doc["notes"])
        fit_doc, _code = memplan.setup("fit", model="gpt2", micro_batch=1, seq_len=128, gpu="t4").fit()
        self.assertIn("from_interpreter", fit_doc)
        plan_doc = memplan.plan(model="gpt2", gpu="t4", seq_len=128, global_batch=8)
        self.assertEqual(plan_doc["from_interpreter"]["transformers_version"]["version"], "5.17")

    def test_what_the_call_says_wins(self):
        doc = memplan.estimate(model="gpt2", micro_batch=1, seq_len=128, torch_version="2.4")
        self.assertEqual(doc["setup"]["runtime"]["torch_version"], "2.4")
        self.assertNotIn("torch_version", doc["from_interpreter"])
        self.assertEqual(doc["setup"]["runtime"]["transformers_version"], "5.17")
        plain = memplan.estimate(model="gpt2", micro_batch=1, seq_len=128, from_interpreter=False)
        self.assertNotIn("from_interpreter", plain)
        code, out, _ = cli("estimate", "--model", "gpt2", "--micro-batch", "1", "--seq-len", "128", "--json")
        self.assertEqual(plain, json.loads(out))
        # A config file may state the versions itself: nothing is filled then.
        config = {"model": {"preset": "gpt2"}, "training": {"micro_batch_size": 1, "seq_len": 128}}
        self.assertNotIn("from_interpreter", memplan.estimate(config=config))


class Errors(unittest.TestCase):
    def assert_same_error(self, kwargs, args, command="estimate"):
        code, _, err = cli(command, *args)
        self.assertEqual(code, 2)
        with self.assertRaises(memplan.InputError) as caught:
            getattr(memplan, command)(**kwargs)
        e = caught.exception
        self.assertIsInstance(e, ValueError)
        self.assertEqual(str(e), err.strip())
        return e

    def test_flag_value(self):
        e = self.assert_same_error(dict(model="gpt2", micro_batch=0), ["--model", "gpt2", "--micro-batch", "0"])
        self.assertEqual((e.flag, e.keyword), ("--micro-batch", "micro_batch"))
        self.assertIn("at least 1", e.message)

    def test_unreadable_value(self):
        e = self.assert_same_error(dict(model="gpt2", micro_batch="abc"), ["--model", "gpt2", "--micro-batch", "abc"])
        self.assertEqual(e.hint, "memplan estimate --help shows what --micro-batch takes")

    def test_unknown_model(self):
        e = self.assert_same_error(dict(model="no-such-model"), ["--model", "no-such-model"])
        self.assertEqual(e.flag, "--model")

    def test_broken_file_has_a_position(self):
        path = os.path.join(ROOT, "tests", "data", "cli", "malformed.yaml")
        e = self.assert_same_error(dict(config=path), ["--config", path])
        self.assertEqual(e.file, path)
        self.assertGreater(e.line, 0)
        self.assertEqual(e.location, f"{path}:{e.line}:{e.col}" if e.col else f"{path}:{e.line}")

    def test_fit_needs_a_device(self):
        self.assert_same_error(dict(model="gpt2"), ["--model", "gpt2"], command="fit")

    def test_unknown_keyword_did_you_mean(self):
        with self.assertRaises(memplan.InputError) as caught:
            memplan.estimate(model="gpt2", micro_bach=4)
        e = caught.exception
        self.assertEqual(e.message, "unknown keyword argument 'micro_bach' for memplan.estimate()")
        self.assertTrue(e.hint.startswith("did you mean 'micro_batch'?"), e.hint)
        self.assertEqual(e.keyword, "micro_bach")

    def test_output_flags_are_not_keywords(self):
        with self.assertRaises(memplan.InputError):
            memplan.estimate(model="gpt2", yaml=True)

    def test_switch_and_value_types(self):
        with self.assertRaises(memplan.InputError) as caught:
            memplan.estimate(model="gpt2", micro_batch=True)
        self.assertEqual(caught.exception.flag, "--micro-batch")
        with self.assertRaises(memplan.InputError):
            memplan.plan(model="gpt2", gpu="rtx-4090", global_batch=8, no_offload="yes")

    def test_a_false_switch_is_its_no_form(self):
        # loss_upcast=False is --no-loss-upcast (the registry's negation), not "left to the default":
        # the document shows it off and the flag the keyword became as where it came from.
        doc = memplan.estimate(model="gpt2", seq_len=128, loss_upcast=False, from_interpreter=False)
        self.assertFalse(doc["setup"]["runtime"]["loss_upcast"])
        self.assertEqual(doc["setup"]["sources"]["runtime.loss_upcast"], "--no-loss-upcast")
        doc = memplan.estimate(model="gpt2", seq_len=128, framework="litgpt", keep_logits=False, from_interpreter=False)
        self.assertFalse(doc["setup"]["runtime"]["keep_logits"])  # LitGPT's default would keep them
        # A plain flag without a --no- form: False leaves it out.
        memplan.estimate(model="gpt2", seq_len=128, strict=False, from_interpreter=False)

    def test_dict_errors_name_the_argument(self):
        with self.assertRaises(memplan.InputError) as caught:
            memplan.estimate(model={"model_type": "gpt2", "n_embd": "wide"})
        self.assertEqual(caught.exception.file, "<model dict>")
        self.assertNotIn("memplan-", str(caught.exception))  # no temporary path leaks out


class Library(unittest.TestCase):
    """memplan.setup() binds the library: the Setup and its Breakdown hold the same numbers as the
    documents the CLI prints, without a command handler or JSON text in between."""

    KW = dict(model="llama-3.2-1b", gpu="h100-80gb", micro_batch=2, seq_len=1024, precision="amp-bf16",
              checkpointing="full", from_interpreter=False)
    ARGS = ["--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--micro-batch", "2", "--seq-len", "1024",
            "--precision", "amp-bf16", "--checkpointing", "full"]

    def test_breakdown_is_the_document(self):
        s = memplan.setup(**self.KW)
        self.assertIsInstance(s, memplan.Setup)
        b = s.estimate()
        self.assertIsInstance(b, memplan.Breakdown)
        code, out, err = cli("estimate", *self.ARGS, "--json")
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(b.document(), doc)
        g = doc["per_gpu"]
        self.assertEqual(b.peak_bytes, g["peak_bytes"])
        self.assertEqual(b.allocated_peak_bytes, g["allocated_peak_bytes"])
        self.assertEqual(b.reserved_peak_bytes, g["reserved_peak_bytes"])
        self.assertEqual((b.peak_phase, b.peak_at), (g["peak_phase"], g["peak_at"]))
        self.assertEqual(b.terms, {t["name"]: t["bytes"] for t in g["terms"]})
        self.assertEqual(sum(b.terms.values()), b.peak_bytes)
        self.assertEqual([(p["name"], p["bytes"], p["terms"]) for p in b.phases],
                         [(p["name"], p["bytes"], p["terms"]) for p in g["phases"]])
        self.assertEqual(b.verdict, doc["verdict"])
        self.assertEqual(b.band, doc["verdict"]["status"])
        self.assertIn(b.band, memplan.monitor.BANDS)
        self.assertEqual(b.parameters["total"], doc["model"]["parameters"])
        self.assertEqual(b.host, doc["host"])
        self.assertEqual(b.notes, doc["notes"])
        self.assertEqual(s.setup, doc["setup"])
        self.assertEqual(s.sources, doc["setup"]["sources"])
        self.assertEqual(s.model, doc["model"]["name"])
        self.assertEqual(b.exit_code, code)
        # The lines memplan estimate's table prints about the setup.
        code, table, _ = cli("estimate", *self.ARGS)
        self.assertIn("  " + s.describe() + "\n", table)
        self.assertIn("  " + s.describe_runtime() + "\n", table)

    def test_over_the_card(self):
        s = memplan.setup(model="llama-3-8b", gpu="t4", seq_len=2048, from_interpreter=False)
        b = s.estimate()
        code, out, _ = cli("estimate", "--model", "llama-3-8b", "--gpu", "t4", "--seq-len", "2048", "--json")
        self.assertEqual((b.exit_code, code), (1, 1))
        self.assertEqual(b.band, json.loads(out)["verdict"]["status"])
        self.assertIn(b.band, ("emergency", "out_of_memory"))
        self.assertGreater(b.verdict["utilization"], 1.0)

    def test_fit_of_a_setup(self):
        kw = dict(self.KW, micro_batch=64)
        doc, code = memplan.setup("fit", **kw).fit()
        args = [a if a != "2" else "64" for a in self.ARGS]
        cli_code, out, err = cli("fit", *args, "--json")
        self.assertIn(cli_code, (0, 1), err)
        self.assertEqual((doc, code), (json.loads(out), cli_code))
        self.assertEqual(doc, memplan.fit(**kw))

    def test_no_device_no_band(self):
        b = memplan.setup(model="gpt2", seq_len=128, from_interpreter=False).estimate()
        self.assertEqual(b.band, "unknown")
        self.assertIsNone(b.verdict["fits"])
        self.assertEqual(b.exit_code, 0)

    def test_setup_warnings(self):
        # A near-miss key: the reader's warning, as the CLI prints it, on the Setup and as a ConfigWarning.
        config = {"model": {"preset": "gpt2"}, "training": {"micro_batch_sise": 2, "seq_len": 128}}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = memplan.setup(config=config, from_interpreter=False)
        self.assertTrue(s.warnings, "a near-miss key warns")
        self.assertTrue(any("micro_batch_size" in w for w in s.warnings), s.warnings)
        said = [str(w.message) for w in caught if issubclass(w.category, memplan.ConfigWarning)]
        self.assertEqual(len(said), len(s.warnings))
        self.assertTrue(all("<config dict>" in w for w in said), said)  # the temporary path is named as the argument
        self.assertEqual(caught[0].filename, __file__)  # attributed to the caller

    def test_warnings_before_an_error(self):
        # The CLI prints the reader's warning and then fit's / plan's refusal; Python issues the
        # warning, then raises.
        config = {"model": {"preset": "gpt2"}, "training": {"micro_batch_sise": 1, "seq_len": 128}}
        for command in ("fit", "plan"):
            with self.subTest(command=command):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    with self.assertRaises(memplan.InputError):
                        getattr(memplan, command)(config=config, from_interpreter=False)
                said = [str(w.message) for w in caught if issubclass(w.category, memplan.ConfigWarning)]
                self.assertEqual(len(said), 1, said)
                self.assertIn("micro_batch_size", said[0])
                self.assertEqual(caught[0].filename, __file__)

    def test_a_dict_argument_is_named(self):
        config = {"model": {"preset": "gpt2"}, "training": {"micro_batch_sise": 2, "seq_len": 128}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", memplan.ConfigWarning)
            s = memplan.setup(config=config, from_interpreter=False)
        self.assertEqual(s.config_path, "<config dict>")
        self.assertTrue(all("memplan-" not in w and "<config dict>" in w for w in s.warnings), s.warnings)
        # Every document names it so, not a temporary file that no longer exists.
        doc = s.estimate().document()
        self.assertNotIn(tempfile.gettempdir() + "/memplan-", json.dumps([doc, s.setup, s.sources, s.estimate().notes]))
        self.assertTrue(doc["warnings"] and all("<config dict>" in w for w in doc["warnings"]), doc["warnings"])
        self.assertTrue(any(v.startswith("<config dict>:") for v in s.sources.values()), s.sources)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", memplan.ConfigWarning)
            self.assertEqual(memplan.estimate(config=config, from_interpreter=False)["warnings"], doc["warnings"])

    def test_warnings_name_the_callers_line_through_the_package(self):
        # memplan's own modules (the monitor, the callbacks) call setup() and estimate() too: the
        # warning is the caller's, not the package's.
        config = {"model": {"preset": "gpt2"}, "training": {"micro_batch_sise": 2, "seq_len": 128}}
        ns = {"__name__": "memplan._inside", "memplan": memplan}
        exec("def call(**kw):\n    return memplan.setup(**kw)\n", ns)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ns["call"](config=config, from_interpreter=False)
        self.assertTrue(caught)
        self.assertEqual(caught[0].filename, __file__)

    def test_wrong_argument_type_is_not_an_internal_error(self):
        with self.assertRaises(TypeError):
            memplan._memplan.Setup("estimate", [1, 2])

    def test_bad_input(self):
        with self.assertRaises(memplan.InputError) as caught:
            memplan.setup(model="gpt2", micro_batch="abc")
        self.assertEqual(caught.exception.flag, "--micro-batch")
        with self.assertRaises(ValueError):
            memplan.setup("plan", model="gpt2")

    def test_no_command_handler(self):
        # The module binds the library (api/, estimator/, planner/, profiles/), not cli/: no run(),
        # and its source includes no command-line header.
        self.assertFalse(hasattr(memplan._memplan, "run"))
        with open(os.path.join(ROOT, "python", "_memplan.cpp")) as f:
            self.assertNotIn('#include "cli/', f.read())


if __name__ == "__main__":
    unittest.main()
