#!/usr/bin/env python3
"""Mutation sweep over the tool-format fixtures (issue 24): every numeric value of every file in
tests/data/formats (YAML, TOML, JSON) is replaced, one at a time, by extreme values and wrong types,
and `memplan estimate --config FILE` must answer each mutant as a user's bad file deserves:

- no signal (a crash), no exit 3 (an internal error), nothing over the time limit;
- no sanitizer report on stderr (the sanitizer build runs the same sweep);
- a refusal (exit 2) starts `FILE:LINE` (the mutated file, or a file it names), prints nothing on
  stdout and gives a hint;
- exit 0 or 1 (fits or not) is an answer: a value that does not change memory may be taken.

    tests/hostile/sweep.py MEMPLAN [--formats DIR] [--values quick|full] [--jobs N] [--time S]

The fixtures are copied per worker so that a file's references (DeepSpeed JSON next to it, the HF
cache) resolve as they do for the original; HF_HUB_CACHE points at the fixtures' hf_cache and the
Hub is off. A fixture that names no model (accelerate, some Lightning files) gets `--model
llama-3.2-1b`, as its baseline needs. Prints a table of outcomes per value and each failure.
"""
import argparse
import collections
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

NUM = r"-?(?:\d[\d_]*)(?:\.\d+)?(?:[eE][+-]?\d+)?"
# key: value lines (YAML), key = value (TOML), "key": value (JSON, anywhere on a line); YAML and
# TOML list items of one number.
PATTERNS = {
    "yaml": [re.compile(r"^(\s*(?:-\s+)?[\w.\-\"']+\s*:\s+)(" + NUM + r")(\s*(?:#.*)?)$"),
             re.compile(r"^(\s*-\s+)(" + NUM + r")(\s*(?:#.*)?)$")],
    "toml": [re.compile(r"^(\s*[\w.\-\"]+\s*=\s*)(" + NUM + r")(\s*(?:#.*)?)$")],
    "json": [re.compile(r"(\"[^\"]+\"\s*:\s*)(" + NUM + r")(\s*[,}\]]?)")],
}
EXTREME = ["0", "-1", "4294967296", "4611686018427387904", "9223372036854775807", "1e30"]
# The same ideas in each syntax: NaN, infinity, then wrong types.
SPECIAL = {
    "yaml": [".nan", ".inf", '"x"', "[1]", "{a: 1}", "true"],
    "toml": ["nan", "inf", '"x"', "[1]", "{ a = 1 }", "true"],
    "json": ["NaN", "1e999", '"x"', "[1]", "{}", "true", "null"],
}
QUICK = ["0", "-1", "9223372036854775807", "1e30"]
SANITIZER = ("runtime error:", "AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "MemorySanitizer")


def syntax_of(path):
    ext = os.path.splitext(path)[1]
    return {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}.get(ext)


def sites(text, syntax):
    """(line index, match) of every numeric value in the file."""
    out = []
    for i, line in enumerate(text.split("\n")):
        if syntax != "json" and line.lstrip().startswith("#"):
            continue
        for pat in PATTERNS[syntax]:
            m = pat.search(line)
            if m:
                out.append((i, m))
                break
    return out


def run(memplan, cfg, extra, env, limit):
    t0 = time.monotonic()
    try:
        p = subprocess.run([memplan, "estimate", "--config", cfg, *extra], capture_output=True, env=env,
                           timeout=limit, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return None, "", "", time.monotonic() - t0


def verdict(rc, out, err, secs, cfg, limit):
    """'' when the answer is acceptable, else why not."""
    if rc is None:
        return f"over {limit} s"
    if rc < 0:
        return f"signal {-rc}"
    if any(s in err for s in SANITIZER):
        return "sanitizer report: " + next(l for l in err.splitlines() if any(s in l for s in SANITIZER))[:160]
    if rc == 3:
        return "exit 3: " + (err.splitlines() or [""])[0][:160]
    if rc not in (0, 1, 2):
        return f"exit {rc}"
    if rc == 2:
        first = (err.splitlines() or [""])[0]
        if out.strip():
            return "exit 2 with output on stdout"
        # At a line of the mutated file, or of a file it names (a DeepSpeed JSON beside it).
        if not re.match(r"\S[^:]*:\d+(:\d+)?: error: ", first):
            return "refused without FILE:LINE: " + first[:160]
        if "hint:" not in err:
            return "refused without a hint: " + first[:160]
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memplan")
    ap.add_argument("--formats", default=os.path.join(os.path.dirname(__file__), "..", "data", "formats"))
    ap.add_argument("--values", choices=["quick", "full"], default="full")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--time", type=float, default=10.0, help="seconds one run may take")
    ap.add_argument("--only", help="only fixtures whose path contains this")
    ap.add_argument("--accepted", help="write each mutant answered with exit 0 or 1 here (file:line: value: the line)")
    a = ap.parse_args()
    memplan = os.path.abspath(a.memplan)
    src = os.path.abspath(a.formats)
    work = tempfile.mkdtemp(prefix="memplan-sweep-")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", NO_COLOR="1")
    try:
        fixtures = []
        for root, _, files in os.walk(src):
            if "hf_cache" in root.split(os.sep):
                continue
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(root, f), src)
                if syntax_of(rel) and (not a.only or a.only in rel):
                    fixtures.append(rel)
        fixtures.sort()
        # One copy of the fixtures per worker: a mutant replaces its file in that copy only.
        slots = []
        for k in range(a.jobs):
            d = os.path.join(work, str(k))
            shutil.copytree(src, d)
            slots.append(d)
        env["HF_HUB_CACHE"] = os.path.join(slots[0], "hf_cache")

        # Baselines: which extra flags each fixture needs to be estimated at all.
        plan = []
        for rel in fixtures:
            cfg = os.path.join(slots[0], rel)
            extra = []
            rc, out, err, _ = run(memplan, cfg, extra, env, a.time)
            if rc == 2 and re.search(r"no model given|names no model|names no architecture|without a model", err):
                extra = ["--model", "llama-3.2-1b"]
                rc, out, err, _ = run(memplan, cfg, extra, env, a.time)
            base_bad = verdict(rc, out, err, 0, cfg, a.time)
            text = open(os.path.join(src, rel), encoding="utf-8").read()
            syntax = syntax_of(rel)
            values = (QUICK if a.values == "quick" else EXTREME + SPECIAL[syntax])
            for line, m in sites(text, syntax):
                for v in values:
                    plan.append((rel, extra, line, m.start(2), m.end(2), v, base_bad))

        def one(job):
            k, (rel, extra, line, s, e, v, base_bad) = job
            cfg = os.path.join(slots[k], rel)
            original = open(os.path.join(src, rel), encoding="utf-8").read()
            lines = original.split("\n")
            lines[line] = lines[line][:s] + v + lines[line][e:]
            with open(cfg, "w", encoding="utf-8") as f:
                f.write("\n".join(lines))
            try:
                rc, out, err, secs = run(memplan, cfg, extra, env, a.time)
            finally:
                with open(cfg, "w", encoding="utf-8") as f:
                    f.write(original)
            return rel, line + 1, v, rc, secs, verdict(rc, out, err, secs, cfg, a.time), (err.splitlines() or [""])[0], lines[line]

        # Each worker owns one slot: jobs are dealt round-robin and run in order within a slot.
        results = []
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
            def slot_worker(k):
                return [one((k, job)) for job in plan[k::a.jobs]]
            for part in ex.map(slot_worker, range(a.jobs)):
                results.extend(part)
        elapsed = time.monotonic() - t0

        by_value = collections.OrderedDict()
        failures = []
        slowest = max(results, key=lambda r: r[4]) if results else None
        accepted = []
        for rel, line, v, rc, secs, bad, first, text in results:
            if rc in (0, 1):
                accepted.append(f"{rel}:{line}: {v}: {text.strip()}")
            row = by_value.setdefault(v, collections.Counter())
            row["runs"] += 1
            row["fail" if bad else {0: "exit 0", 1: "exit 1", 2: "exit 2"}.get(rc, "other")] += 1
            if bad:
                failures.append(f"{rel}:{line}: value {v}: {bad}")
        print(f"mutation sweep: {len(fixtures)} fixtures, {len(plan)} runs in {elapsed:.0f} s "
              f"({a.jobs} jobs, values: {a.values})")
        print(f"{'value':>22} {'runs':>6} {'exit 0':>7} {'exit 1':>7} {'exit 2':>7} {'fail':>6}")
        for v, c in by_value.items():
            print(f"{v:>22} {c['runs']:>6} {c['exit 0']:>7} {c['exit 1']:>7} {c['exit 2']:>7} {c['fail']:>6}")
        if slowest:
            print(f"slowest run: {slowest[4]:.2f} s ({slowest[0]}:{slowest[1]} = {slowest[2]})")
        for f in failures[:200]:
            print("FAIL " + f)
        if len(failures) > 200:
            print(f"... and {len(failures) - 200} more")
        print(f"{len(failures)} failures")
        if a.accepted:
            with open(a.accepted, "w") as f:
                f.write("\n".join(accepted) + "\n")
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
