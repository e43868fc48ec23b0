// The CLI's releases from the job's Python (cli/python_env.h): real interpreters (Debian's
// python3 with its python3-torch where installed, and a venv made here with torch and
// transformers laid out in it as pip installs them: the package folder, torch/version.py,
// transformers/__init__.py's __version__), the cached import path and when it is asked again,
// interpreters that hang, fail or flood, and the whole command (build/memplan run as a process):
// the runtime line says which releases it assumed and where from, and a config or a flag wins.
#include <doctest/doctest.h>

#include "tests/capture.h"
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/python_env.h"

namespace fs = std::filesystem;
using memplan::cli::probe_python;
using memplan::cli::PythonEnvironment;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "memplan-pyenv.XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

using memplan::testing::capture_output;

// A real venv (python3 -m venv --without-pip) at dir/venv; its site-packages folder.
fs::path make_venv(const fs::path& dir) {
  const std::string cmd = fmt::format("/usr/bin/python3 -m venv --without-pip '{}' 2>&1", (dir / "venv").string());
  if (std::system(cmd.c_str()) != 0) return {};
  for (const auto& e : fs::directory_iterator(dir / "venv" / "lib"))
    if (fs::exists(e.path() / "site-packages")) return e.path() / "site-packages";
  return {};
}

// torch and transformers as pip lays them out: the package folder with its __init__.py, torch's
// generated version.py, transformers' __version__ in its __init__.py (after the licence header).
void install(const fs::path& site, const std::string& torch, const std::string& transformers) {
  if (!torch.empty()) {
    write(site / "torch" / "__init__.py", "from torch.version import __version__ as __version__\n");
    write(site / "torch" / "version.py",
          fmt::format("from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
                      "__version__ = '{}'\ndebug = False\ncuda: Optional[str] = '13.0'\n",
                      torch));
  }
  if (!transformers.empty())
    write(site / "transformers" / "__init__.py",
          fmt::format("# Copyright 2020 The HuggingFace Team. All rights reserved.\n#\n# Licensed under the Apache License, "
                      "Version 2.0 (the \"License\");\n\n__version__ = \"{}\"\n\nfrom typing import TYPE_CHECKING\n",
                      transformers));
}

const memplan::cli::FoundRelease* found(const PythonEnvironment& env, const std::string& library) {
  for (const auto& r : env.found)
    if (r.library == library) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("python env: Debian's python3 and its python3-torch, as import torch finds it") {
  if (!fs::exists("/usr/bin/python3") || !fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) {
    MESSAGE("no /usr/bin/python3 with python3-torch here: skipped");
    return;
  }
  TempDir tmp;
  const PythonEnvironment env = probe_python("/usr/bin/python3", tmp.path.string());
  REQUIRE(env.why_none.empty());
  const auto* torch = found(env, "torch");
  REQUIRE(torch != nullptr);
  // What the interpreter itself says once torch is imported.
  std::string imported = capture_output("/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null");
  while (!imported.empty() && (imported.back() == '\n' || imported.back() == '\r')) imported.pop_back();
  CHECK(torch->version == imported);
  CHECK(torch->file == "/usr/lib/python3/dist-packages/torch/version.py");
}

TEST_CASE("python env: a venv's releases, the first on the import path winning, the path cached") {
  TempDir tmp;
  const fs::path site = make_venv(tmp.path);
  if (site.empty()) {
    MESSAGE("python3 -m venv failed here: skipped");
    return;
  }
  install(site, "2.11.0+cu130", "5.17.0");
  // A wrapper that counts how often the interpreter is asked, then runs it.
  const fs::path counter = tmp.path / "asked";
  const fs::path wrapper = tmp.path / "bin" / "python3";
  write(wrapper, fmt::format("#!/bin/sh\necho x >> '{}'\nexec '{}' \"$@\"\n", counter.string(), (tmp.path / "venv" / "bin" / "python3").string()));
  fs::permissions(wrapper, fs::perms::owner_all);
  const fs::path cache = tmp.path / "cache";
  fs::create_directories(cache);
  auto asked = [&] {
    std::ifstream in(counter);
    int n = 0;
    std::string l;
    while (std::getline(in, l)) ++n;
    return n;
  };

  PythonEnvironment env = probe_python(wrapper.string(), cache.string());
  REQUIRE(env.why_none.empty());
  REQUIRE(found(env, "torch"));
  CHECK(found(env, "torch")->version == "2.11.0+cu130");
  CHECK(found(env, "torch")->file == (site / "torch" / "version.py").string());
  REQUIRE(found(env, "transformers"));
  CHECK(found(env, "transformers")->version == "5.17.0");
  CHECK(asked() == 1);

  // Asked once: the next probe reads the cached path, and sees an upgrade at once.
  install(site, "2.12.1", "");
  env = probe_python(wrapper.string(), cache.string());
  CHECK(asked() == 1);
  CHECK(found(env, "torch")->version == "2.12.1");

  // A package installed changes site-packages itself: the path is asked again.
  write(site / "peft" / "__init__.py", "__version__ = \"0.21.0\"\n");
  env = probe_python(wrapper.string(), cache.string());
  CHECK(asked() == 2);
  CHECK(found(env, "transformers")->version == "5.17.0");

  // PYTHONPATH comes first on sys.path: its torch is the one imported (and the key changes).
  const fs::path extra = tmp.path / "extra";
  install(extra, "2.9.0", "");
  ::setenv("PYTHONPATH", extra.c_str(), 1);
  env = probe_python(wrapper.string(), cache.string());
  ::unsetenv("PYTHONPATH");
  CHECK(asked() == 3);
  CHECK(found(env, "torch")->version == "2.9.0");
  CHECK(found(env, "transformers")->version == "5.17.0");

  // Without transformers: torch alone.
  fs::remove_all(site / "transformers");
  env = probe_python(wrapper.string(), "");
  CHECK(found(env, "transformers") == nullptr);
  CHECK(found(env, "torch")->version == "2.12.1");
}

TEST_CASE("python env: interpreters that are missing, fail, hang or flood give no release and say why") {
  TempDir tmp;
  CHECK(probe_python("memplan-no-such-python", "").why_none == "no memplan-no-such-python on PATH");
  CHECK(probe_python((tmp.path / "none").string(), "").why_none.find("is not an executable") != std::string::npos);
  auto script = [&](const std::string& name, const std::string& body) {
    const fs::path p = tmp.path / name;
    write(p, "#!/bin/sh\n" + body + "\n");
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  };
  CHECK(probe_python(script("fails", "exit 3"), "").why_none.find("failed to print its sys.path") != std::string::npos);
  CHECK(probe_python(script("floods", "exec yes /usr/lib/python3"), "").why_none.find("too long") != std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  const PythonEnvironment hung = probe_python(script("hangs", "exec sleep 30"), "", /*timeout_s=*/1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(hung.why_none.find("did not answer within 1 s") != std::string::npos);
  CHECK(s < 5);
}

TEST_CASE("python env: the command answers for the releases found and says so; a config or a flag wins") {
  TempDir tmp;
  const fs::path site = make_venv(tmp.path);
  if (site.empty()) {
    MESSAGE("python3 -m venv failed here: skipped");
    return;
  }
  install(site, "1.13.1", "4.52.4");
  const std::string python = (tmp.path / "venv" / "bin" / "python3").string();
  auto memplan = [&](const std::string& env, const std::string& args) {
    return capture_output(fmt::format("env XDG_CACHE_HOME='{}' {} '{}/memplan' {} 2>&1", (tmp.path / "cache").string(), env, MEMPLAN_BUILD_DIR, args));
  };
  const std::string args = "estimate --model gpt2 --gpu h100-80gb --micro-batch 1 --seq-len 512";
  auto runtime_line = [](const std::string& out) {
    const size_t at = out.find("  runtime: ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  const std::string detected = runtime_line(memplan("MEMPLAN_JOB_PYTHON=" + python, args));
  CHECK(detected.find(fmt::format("torch 1.13 and transformers 4.52 (installed for {})", python)) != std::string::npos);
  // torch 1.x: zero_grad keeps the gradients, as the flag --torch-version 1.13 reads it.
  const std::string j = memplan("MEMPLAN_JOB_PYTHON=" + python, args + " --json");
  const nlohmann::json doc = nlohmann::json::parse(j);
  CHECK(doc["setup"]["runtime"]["torch_version"] == "1.13");
  CHECK(doc["setup"]["runtime"]["zero_grad_set_to_none"] == false);
  CHECK(doc["setup"]["sources"]["runtime.torch_version"].get<std::string>().find((site / "torch" / "version.py").string() + " says 1.13.1") !=
        std::string::npos);
  const nlohmann::json flagged = nlohmann::json::parse(memplan("MEMPLAN_JOB_PYTHON=" + python, args + " --torch-version 1.13 --json"));
  CHECK(flagged["per_gpu"]["peak_bytes"] == doc["per_gpu"]["peak_bytes"]);

  // A flag wins over the venv.
  CHECK(runtime_line(memplan("MEMPLAN_JOB_PYTHON=" + python, args + " --torch-version 2.6")).find("torch 2.6, transformers 4.52 (installed for") !=
        std::string::npos);
  // So does the config's runtime section.
  write(tmp.path / "job.yaml", "model: gpt2\nhardware:\n  gpu: h100-80gb\ntraining:\n  micro_batch_size: 1\n  seq_len: 512\nruntime:\n  torch_version: '2.9'\n");
  CHECK(runtime_line(memplan("MEMPLAN_JOB_PYTHON=" + python, "estimate --config " + (tmp.path / "job.yaml").string())).find("torch 2.9, transformers 4.52") !=
        std::string::npos);
  // Off, or nothing found: memplan's defaults, and why.
  CHECK(runtime_line(memplan("MEMPLAN_JOB_PYTHON=", args)).find("torch 2.11 and transformers 5.17 (memplan's defaults): ") != std::string::npos);
  CHECK(runtime_line(memplan("MEMPLAN_JOB_PYTHON=none", args)).find("torch 2.11 and transformers 5.17 (memplan's defaults): ") != std::string::npos);
  CHECK(runtime_line(memplan("MEMPLAN_JOB_PYTHON=memplan-no-such-python", args))
            .find("torch 2.11 and transformers 5.17 (memplan's defaults; no memplan-no-such-python on PATH)") != std::string::npos);
}
