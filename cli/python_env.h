// The releases of torch and transformers that the job's Python would import, for the CLI's
// defaults (issue "Today's stack by default"): a config or a flag that states a release wins; a
// setup that states none is estimated for what `python3` on PATH (or $MEMPLAN_JOB_PYTHON) has
// installed, else for memplan's current default (estimator/setup.h Runtime).
//
// Fast and without importing torch: the interpreter is asked once for its import path (sys.path),
// which is cached under ~/.cache/memplan/python/ keyed by the interpreter and the environment that
// decides its path; each run then reads the version files along that path as `import` would find
// them (torch/version.py, transformers/__init__.py's __version__), so an upgrade shows at once.
// MEMPLAN_JOB_PYTHON= (empty) or MEMPLAN_JOB_PYTHON=none turns the probe off (the test suites do).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "profiles/profiles.h"

namespace memplan::cli {

struct FoundRelease {
  std::string library;  // "torch", "transformers"
  std::string version;  // as the package writes it: "2.11.0+cu130"
  std::string file;     // the file it was read from
};

struct PythonEnvironment {
  std::string interpreter;               // the python found ("" when none)
  std::vector<std::string> import_path;  // its sys.path (cached)
  std::vector<FoundRelease> found;
  std::string why_none;                  // when nothing was probed: why ("no python3 on PATH", ...)
  bool off = false;                      // MEMPLAN_JOB_PYTHON empty or none: not asked
};

// Probes once per process (the answer is kept).
const PythonEnvironment& python_environment();

// How long the interpreter may take to print its import path.
constexpr int kProbeSeconds = 10;

// The probe itself, for the tests: `python` is the interpreter to ask (a name looked up on PATH
// or a path), `cache_dir` where to keep its import path ("" for no cache).
PythonEnvironment probe_python(const std::string& python, const std::string& cache_dir, int timeout_s = kProbeSeconds);

// `in` with the releases it leaves unsaid filled from python_environment(): build_setup applies
// them below the config and the flags (SetupInputs::environment). With the probe off, `in` as it
// is: the answer is the library's, memplan's defaults (what the Python module gives too).
profiles::SetupInputs with_environment(const profiles::SetupInputs& in);

}  // namespace memplan::cli
