// memplan check, the command end to end through cli::run (the gate's logic, planner/check.h, is
// tested in tests/planner/check_test.cpp) (walking folders, skipping
// files that are not training configs, per-file errors, the four output formats), including a real
// git repository in a temporary folder with a passing and a failing change (issue 5).
// Expected numbers come from estimate() on the same setups, so the tests pin the gate's wording and
// logic rather than the estimator's current values.
#include <doctest/doctest.h>

#include <chrono>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/common.h"
#include "planner/check.h"
#include "profiles/profiles.h"
#include "tests/profiles/local_hub.h"

namespace fs = std::filesystem;
using memplan::cli::gib;
using memplan::cli::percent;

namespace memplan {
namespace {

const std::string kCheckData = std::string(MEMPLAN_TEST_DATA) + "/check";
std::string data(const std::string& name) { return kCheckData + "/" + name; }
std::string examples_dir() { return (fs::path(MEMPLAN_TEST_DATA) / ".." / ".." / "examples").lexically_normal().string(); }

struct CheckRun {
  int code = -1;
  std::string out, err;
};

CheckRun check(std::vector<std::string> args) {
  args.insert(args.begin(), {"memplan", "check"});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CheckRun r;
  r.code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
bool has_line(const std::string& text, const std::string& line) {
  for (const std::string& l : lines_of(text))
    if (l == line) return true;
  return false;
}
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& l : lines_of(text))
    if (l.rfind(prefix, 0) == 0) out.push_back(l);
  return out;
}
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TrainingSetup setup_of(const std::string& path) {
  profiles::SetupInputs in;
  in.config = path;
  return profiles::build_setup(in).setup;
}
int64_t peak(const TrainingSetup& s) { return estimate(s).peak_bytes(); }
// GitHub's escaping of a workflow command's message (the tests' messages hold '%', no newlines).
std::string gh(std::string s) {
  for (size_t at = 0; (at = s.find('%', at)) != std::string::npos; at += 3) s.replace(at, 1, "%25");
  return s;
}

// ---- the command ----------------------------------------------------------------------------------

TEST_CASE("memplan check examples/: each bundled example's own verdict; CI files and ds_config skipped") {
  const std::string dir = examples_dir();
  const CheckRun r = check({dir, "--gpu", "rtx-3090"});
  CAPTURE(r.out);
  // The right verdict for each example is the estimate against the target the example names.
  int passed = 0, failed = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string path = fs::path(e.path()).lexically_normal().string();
    const std::string ext = e.path().extension().string();
    if (ext != ".yaml" && ext != ".yml") continue;
    const TrainingSetup s = setup_of(path);
    const bool fits = judge(estimate(s), s).fits;
    (fits ? passed : failed) += 1;
    const std::vector<std::string> l = lines_starting(r.out, fmt::format("{}  {}  ", fits ? "PASS" : "FAIL", path));
    CHECK_MESSAGE(l.size() == 1, path);
    if (l.size() == 1) CHECK(l[0].find(" on " + s.device.name) != std::string::npos);
  }
  CHECK(passed >= 5);
  // Every bundled top-level example is meant to fit the target it names.
  CHECK(failed == 0);
  // Each example names its own target: --gpu rtx-3090 is only a default.
  CHECK(lines_starting(r.out, fmt::format("PASS  {}/nemo-policy.yaml  ", dir))[0].find("on a100-80gb") != std::string::npos);
  CHECK(has_line(r.out, fmt::format("SKIP  {}/ds_config.json: not a training config: DeepSpeed config without a model "
                                    "(memplan estimate --config FILE --model NAME estimates it)",
                                    dir)));
  CHECK(has_line(r.out, fmt::format("SKIP  {}/ci/memplan-check.yml: not a training config: CI workflow (jobs:)", dir)));
  CHECK(has_line(r.out, fmt::format("SKIP  {}/ci/pre-commit-config.yaml: not a training config: pre-commit "
                                    "configuration (repos:)",
                                    dir)));
  // The summary counts what the walk reported (subfolders such as examples/published/ included).
  const size_t pass_lines = lines_starting(r.out, "PASS  ").size(), fail_lines = lines_starting(r.out, "FAIL  ").size();
  const size_t skip_lines = lines_starting(r.out, "SKIP  ").size();
  CHECK(pass_lines >= static_cast<size_t>(passed));
  CHECK(has_line(r.out, fmt::format("memplan check: {} configs checked: {} passed, {} failed; 0 invalid; {} skipped",
                                    pass_lines + fail_lines, pass_lines, fail_lines, skip_lines)));
  CHECK(r.code == (fail_lines > 0 ? 1 : 0));
}

TEST_CASE("memplan check DIR: walks in sorted order, skips non-configs with a note, ignores hidden and other files") {
  const CheckRun r = check({data("tree")});
  CAPTURE(r.out);
  CHECK(r.code == 1);
  const std::string t = data("tree");
  const std::vector<std::string> expected_order = {
      "SKIP  " + t + "/calibration.yaml: not a training config: memplan calibration profile (pass it with --calibration)",
      "SKIP  " + t + "/ds_config.json: not a training config: DeepSpeed config without a model (memplan estimate "
                     "--config FILE --model NAME estimates it)",
      "PASS  " + t + "/fits.yaml  ",
      "FAIL  " + t + "/nested/big.yml  ",
      "SKIP  " + t + "/workflow.yml: not a training config: CI workflow (jobs:)",
  };
  std::vector<std::string> firsts;
  for (const std::string& l : lines_of(r.out))
    if (l.rfind("PASS", 0) == 0 || l.rfind("FAIL", 0) == 0 || l.rfind("SKIP", 0) == 0 || l.rfind("ERROR", 0) == 0)
      firsts.push_back(l);
  REQUIRE(firsts.size() == expected_order.size());
  for (size_t i = 0; i < firsts.size(); ++i) CHECK(firsts[i].rfind(expected_order[i], 0) == 0);
  CHECK(r.out.find(".hidden") == std::string::npos);
  CHECK(r.out.find("notes.txt") == std::string::npos);
  CHECK(has_line(r.out, "memplan check: 2 configs checked: 1 passed, 1 failed; 0 invalid; 3 skipped"));
}

TEST_CASE("memplan check: a broken file among good ones is reported, the others are still checked, exit 2") {
  const CheckRun r = check({data("broken.yaml"), data("fits.yaml"), data("over.yaml")});
  CAPTURE(r.out);
  CHECK(r.code == 2);
  CHECK(has_line(r.out, "ERROR " + data("broken.yaml") + ":6:3: error: training.micro_batch_size must be a positive "
                                                          "integer (got 'many')"));
  CHECK(lines_starting(r.out, "PASS  " + data("fits.yaml") + "  ").size() == 1);
  CHECK(lines_starting(r.out, "FAIL  " + data("over.yaml") + "  ").size() == 1);
  CHECK(has_line(r.out, "memplan check: 2 configs checked: 1 passed, 1 failed; 1 invalid; 0 skipped"));
}

TEST_CASE("memplan check: the target is the config's own; --gpu is the default for configs that name none") {
  CheckRun r = check({data("no_target.yaml")});
  CHECK(r.code == 2);
  CHECK(has_line(r.out, "ERROR " + data("no_target.yaml") + ": error: no target GPU for this config"));
  r = check({data("no_target.yaml"), "--gpu", "rtx-3090"});
  CHECK(r.code == 0);
  CHECK(lines_starting(r.out, "PASS  " + data("no_target.yaml") + "  ")[0].find("on rtx-3090") != std::string::npos);
  // over.yaml names rtx-3060-12gb; on an 80 GB card it would fit, but its own target wins.
  const TrainingSetup over = setup_of(data("over.yaml"));
  const profiles::GpuProfile* h100 = profiles::gpu_catalog().find("h100-80gb");
  REQUIRE(h100);
  CHECK(peak(over) < static_cast<int64_t>(0.9 * static_cast<double>(h100->usable_bytes())));
  r = check({data("over.yaml"), "--gpu", "h100-80gb"});
  CHECK(r.code == 1);
  CHECK(lines_starting(r.out, "FAIL  " + data("over.yaml") + "  ")[0].find("on rtx-3060-12gb") != std::string::npos);
}

TEST_CASE("memplan check: --gpus is a default too; --calibration applies to configs on its device") {
  const nlohmann::json a = nlohmann::json::parse(
      check({data("no_target.yaml"), examples_dir() + "/ava-moe.yaml", "--gpu", "rtx-3090", "--gpus", "8", "--format", "json"}).out);
  REQUIRE(a["results"].size() == 2);
  CHECK(a["results"][0]["setup"].get<std::string>().find(", 8 GPUs") != std::string::npos);
  CHECK(a["results"][1]["setup"].get<std::string>().find(", 2 GPUs") != std::string::npos);  // hardware.num_gpus: 2

  const std::string cal = std::string(MEMPLAN_TEST_DATA) + "/profiles/calibration.yaml";  // measured on rtx-3090
  const nlohmann::json c =
      nlohmann::json::parse(check({data("tree/fits.yaml"), data("fits.yaml"), "--calibration", cal, "--format", "json"}).out);
  REQUIRE(c["results"].size() == 2);
  CHECK(c["results"][0]["calibrated"] == true);
  CHECK(c["results"][0]["notes"].empty());
  CHECK(c["results"][1]["calibrated"] == false);
  CHECK(c["results"][1]["notes"] ==
        nlohmann::json{"calibration for rtx-3090 not applied: this config targets rtx-3060-12gb"});
}

TEST_CASE("memplan check: files named on the command line must be training configs") {
  CheckRun r = check({data("tree/ds_config.json")});
  CHECK(r.code == 2);
  CHECK(has_line(r.out, "ERROR " + data("tree/ds_config.json") + ": error: not a training config: DeepSpeed config "
                                                                   "without a model (memplan estimate --config FILE "
                                                                   "--model NAME estimates it)"));
  r = check({data("nowhere.yaml")});
  CHECK(r.code == 2);
  CHECK(has_line(r.out, "ERROR " + data("nowhere.yaml") + ": error: no such file or directory"));
}

TEST_CASE("memplan check --strict: a near-miss key fails the gate; github annotates its line") {
  const std::string p = data("typo.yaml");
  CheckRun r = check({p, "--format", "github"});
  CAPTURE(r.out);
  CHECK(r.code == 0);
  CHECK(has_line(r.out, "::warning file=" + p + ",line=7,col=3,title=memplan::unknown key 'micro_bach_size'%0Ahint: did "
                                               "you mean 'micro_batch_size'?"));
  r = check({p, "--strict", "--format", "github"});
  CHECK(r.code == 1);
  CHECK(has_line(r.out, "::error file=" + p + ",line=7,col=3,title=memplan::unknown key 'micro_bach_size'%0Ahint: did "
                                             "you mean 'micro_batch_size'?"));
}

TEST_CASE("memplan check --baseline FILE: per-term deltas with their cause") {
  const CheckRun r = check({data("over.yaml"), "--baseline", data("fits.yaml")});
  CAPTURE(r.out);
  CHECK(r.code == 1);
  const TrainingSetup base = setup_of(data("fits.yaml")), now = setup_of(data("over.yaml"));
  const int64_t act = estimate(now).peak()[Term::activations] - estimate(base).peak()[Term::activations];
  CHECK(has_line(r.out, fmt::format("      vs {}: {} -> {} (+{})", data("fits.yaml"), gib(peak(base)), gib(peak(now)),
                                    percent(static_cast<double>(peak(now) - peak(base)) / static_cast<double>(peak(base))))));
  CHECK(has_line(r.out, fmt::format("        activations +{}: micro-batch 2 -> 64", gib(act))));
}

TEST_CASE("memplan check --format json: the versioned document") {
  const CheckRun r = check({data("tree"), data("broken.yaml"), "--format", "json"});
  CHECK(r.code == 2);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["schema"] == "memplan.check/v1");
  CHECK(j["memplan_version"].is_string());
  CHECK(j["exit_code"] == 2);
  CHECK(j["summary"] == nlohmann::json{{"checked", 2}, {"passed", 1}, {"failed", 1}, {"errors", 1}, {"skipped", 3}});
  REQUIRE(j["results"].size() == 6);
  std::map<std::string, nlohmann::json> by_path;
  for (const auto& x : j["results"]) by_path[x["path"]] = x;
  const nlohmann::json& fits = by_path.at(data("tree/fits.yaml"));
  CHECK(fits["status"] == "fits");
  CHECK(fits["result"] == "pass");
  CHECK(fits["band"] == "normal");
  CHECK(fits["device"] == "rtx-3090");
  CHECK(fits["peak_bytes"] == peak(setup_of(data("tree/fits.yaml"))));
  for (const char* k : {"capacity_bytes", "utilization", "target_utilization", "peak_phase", "failures", "warnings"})
    CHECK_MESSAGE(fits.contains(k), k);
  const nlohmann::json& big = by_path.at(data("tree/nested/big.yml"));
  CHECK(big["status"] == "over");
  CHECK(big["failures"] == nlohmann::json{"over_budget"});
  CHECK(big["blame"]["field"] == "batch.micro_batch");
  CHECK(big["blame"]["line"] == 5);
  CHECK(by_path.at(data("tree/ds_config.json"))["status"] == "skipped");
  const nlohmann::json& broken = by_path.at(data("broken.yaml"));
  CHECK(broken["status"] == "error");
  CHECK(broken["error"]["where"]["line"] == 6);
  CHECK(broken["error"]["message"] == "training.micro_batch_size must be a positive integer (got 'many')");
}

// A minimal XML well-formedness check: balanced tags, no stray '<' or '&' in text or attributes.
bool balanced_xml(const std::string& x, std::string& why) {
  std::vector<std::string> open;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == '&') {
      const size_t semi = x.find(';', i);
      const std::string ent = semi == std::string::npos ? "" : x.substr(i, semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;") {
        why = "bad entity at " + std::to_string(i);
        return false;
      }
      continue;
    }
    if (x[i] == '>') {
      why = "stray '>' at " + std::to_string(i);
      return false;
    }
    if (x[i] != '<') continue;
    const size_t end = x.find('>', i);
    if (end == std::string::npos) return false;
    std::string tag = x.substr(i + 1, end - i - 1);
    i = end;
    if (tag.find('<') != std::string::npos) {
      why = "'<' inside a tag: " + tag;
      return false;
    }
    if (count(tag, "\"") % 2 != 0) {
      why = "unbalanced quotes in " + tag;
      return false;
    }
    if (tag[0] == '?') continue;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        why = "closing " + tag + " does not match";
        return false;
      }
      open.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;
    open.push_back(tag.substr(0, tag.find(' ')));
  }
  if (!open.empty()) why = "unclosed " + open.back();
  return open.empty();
}

TEST_CASE("memplan check --format junit: one suite, a testcase per file, well-formed") {
  const CheckRun r = check({data("tree"), data("broken.yaml"), "--format", "junit"});
  CAPTURE(r.out);
  CHECK(r.code == 2);
  std::string why;
  CHECK_MESSAGE(balanced_xml(r.out, why), why);
  CHECK(r.out.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"memplan check\" tests=\"6\" "
                    "failures=\"1\" errors=\"1\" skipped=\"3\">",
                    0) == 0);
  CHECK(count(r.out, "<testcase classname=\"memplan\" name=\"") == 6);
  CHECK(count(r.out, "<failure ") == 1);
  CHECK(count(r.out, "<error ") == 1);
  CHECK(count(r.out, "<skipped ") == 3);
  CHECK(r.out.find("(got &apos;many&apos;)") != std::string::npos);  // escaped, not raw quotes
}

TEST_CASE("memplan check: hardware.allocator_cap, the verdict from the capped replay (the H200's 11 GiB runs)") {
  // Micro-batch 1 ran on the H200 under the cap and 2 ran out of memory. The first would cache more
  // than the target's share with room; replayed within that share it still runs, so it passes.
  const CheckRun one = check({data("capped/qwen05-b1-cap11gib.yaml")});
  CHECK(one.code == 0);
  CHECK(one.out.find("PASS") != std::string::npos);
  CHECK(one.out.find(": the allocator frees its cache and retries) on h200") != std::string::npos);
  const CheckRun two = check({data("capped/qwen05-b2-cap11gib.yaml"), "--format", "json"});
  CHECK(two.code == 1);
  const nlohmann::json j = nlohmann::json::parse(two.out);
  const nlohmann::json& r = j["results"][0];
  CHECK(r["runs"] == false);
  CHECK(r["status"] == "over");
  CHECK(r["needed_bytes"] == r["peak_bytes"]);
}

TEST_CASE("memplan check --baseline: a lower allocator cap is the cap's change, blamed at its key") {
  const fs::path dir = fs::temp_directory_path() / ("memplan-check-cap-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string base = (dir / "base.yaml").string(), now = (dir / "now.yaml").string();
  std::ofstream(base) << "model: qwen2.5-0.5b\nprecision: amp-bf16\ngradient_checkpointing: true\ntraining:\n  micro_batch_size: 1\n"
                         "  max_seq_length: 1024\nhardware:\n  gpu: h200\n  allocator_cap: 11GiB\n";
  std::ofstream(now) << "model: qwen2.5-0.5b\nprecision: amp-bf16\ngradient_checkpointing: true\ntraining:\n  micro_batch_size: 1\n"
                        "  max_seq_length: 1024\nhardware:\n  gpu: h200\n  allocator_cap: 9GiB\n";
  const CheckRun r = check({now, "--baseline", base, "--format", "github"});
  CAPTURE(r.out);
  CHECK(r.code == 1);
  CHECK(r.out.find("::error file=" + now + ",line=9,col=3,title=memplan::does not fit h200: ") != std::string::npos);
  CHECK(r.out.find("; cause: allocator cap 11.00 GiB -> 9.00 GiB\n") != std::string::npos);
  CHECK(r.out.find("GPU memory") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("memplan check: usage errors exit 2 before checking anything") {
  CHECK(check({data("fits.yaml"), "--format", "yaml"}).code == 2);
  CheckRun r = check({data("fits.yaml"), "--baseline", data("fits.yaml"), "--max-growth", "lots"});
  CHECK(r.code == 2);
  CHECK(r.err == "error: --max-growth: cannot read 'lots' as a percentage\nhint: write it like 10% or 10\n");
  r = check({data("fits.yaml"), "--max-growth", "10%"});
  CHECK(r.code == 2);
  CHECK(r.err == "error: --max-growth: growth needs something to grow from\nhint: pass --base-ref GIT_REF or --baseline FILE\n");
  CHECK(check({data("fits.yaml"), "--baseline", data("fits.yaml"), "--base-ref", "HEAD"}).code == 2);
  r = check({data("fits.yaml"), "--gpu", "rtx-3099"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: --gpu: unknown GPU 'rtx-3099'\nhint: did you mean ", 0) == 0);
  CHECK(check({}).code == 2);  // PATH is required
  CHECK(check({data("fits.yaml"), "--baseline", data("fits.yaml"), "--max-growth", "10%"}).code == 0);
}

// ---- a real git repository ----------------------------------------------------------------------

// A git repository in a fresh temporary folder, removed afterwards.
struct TempRepo {
  fs::path dir;
  TempRepo() {
    std::string tmpl = (fs::temp_directory_path() / "memplan-check-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    REQUIRE(git("init -q") == 0);
  }
  ~TempRepo() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  int git(const std::string& args) const {
    const std::string cmd = fmt::format(
        "git -C '{}' -c user.name=memplan -c user.email=memplan@example.invalid -c commit.gpgsign=false "
        "-c init.defaultBranch=main {} >/dev/null 2>&1",
        dir.string(), args);
    return std::system(cmd.c_str());
  }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
  }
  void commit(const std::string& message) const {
    REQUIRE(git("add -A") == 0);
    REQUIRE(git("commit -q -m '" + message + "'") == 0);
  }
};

// Runs the test body inside a folder (the CI runs memplan from the repository root).
struct InFolder {
  fs::path before = fs::current_path();
  explicit InFolder(const fs::path& p) { fs::current_path(p); }
  ~InFolder() { fs::current_path(before); }
};

std::string train_yaml(int micro_batch) {
  return fmt::format(
      "# a small GPT-2 fine-tune on a 12 GB card\n"
      "model: gpt2\n"
      "hardware:\n"
      "  gpu: rtx-3060-12gb\n"
      "training:\n"
      "  micro_batch_size: {}\n"  // line 6, col 3: where the annotation must point
      "  seq_len: 512\n"
      "  precision: amp-bf16\n",
      micro_batch);
}

TEST_CASE("memplan check --base-ref in a real git repository: a passing and a failing change") {
  TempRepo repo;
  repo.write("configs/train.yaml", train_yaml(2));
  repo.write("configs/ds_config.json", "{\"train_micro_batch_size_per_gpu\": 4}\n");
  repo.commit("micro-batch 2");
  repo.write("configs/train.yaml", train_yaml(4));
  repo.commit("micro-batch 4: still fits");
  InFolder here(repo.dir);

  TrainingSetup s2 = setup_of("configs/train.yaml");  // micro-batch 4 now
  TrainingSetup base2 = s2, s64 = s2;
  base2.batch.micro_batch = 2;
  s64.batch.micro_batch = 64;

  SUBCASE("the passing change: exit 0, no error annotation") {
    const CheckRun r = check({"configs/", "--base-ref", "HEAD~1", "--format", "github"});
    CAPTURE(r.out);
    CHECK(r.code == 0);
    CHECK(lines_starting(r.out, "::error").empty());
    CHECK(has_line(r.out, "SKIP  configs/ds_config.json: not a training config: DeepSpeed config without a model "
                          "(memplan estimate --config FILE --model NAME estimates it)"));
    CHECK(has_line(r.out, fmt::format("      vs HEAD~1:configs/train.yaml: {} -> {} (+{})", gib(peak(base2)), gib(peak(s2)),
                                      percent(static_cast<double>(peak(s2) - peak(base2)) / static_cast<double>(peak(base2))))));
    CHECK(has_line(r.out, "::notice title=memplan::memplan check: 1 config checked: 1 passed, 0 failed; 0 invalid; 1 skipped"));
  }
  SUBCASE("the same change beyond --max-growth 10%: exit 1, annotated at micro_batch_size") {
    const CheckRun r = check({"configs/", "--base-ref", "HEAD~1", "--max-growth", "10%", "--format", "github"});
    CAPTURE(r.out);
    CHECK(r.code == 1);
    const double growth = static_cast<double>(peak(s2) - peak(base2)) / static_cast<double>(peak(base2));
    REQUIRE(growth > 0.10);
    CHECK(lines_starting(r.out, "::error").size() == 1);
    CHECK(has_line(r.out, gh(fmt::format("::error file=configs/train.yaml,line=6,col=3,title=memplan::peak grew {} against "
                                         "HEAD~1:configs/train.yaml ({} -> {}), more than --max-growth 10.0%; cause: "
                                         "micro-batch 2 -> 4 (+{} peak)",
                                         percent(growth), gib(peak(base2)), gib(peak(s2)), gib(peak(s2) - peak(base2))))));
  }
  SUBCASE("the failing change: exit 1, the exact annotation at the micro_batch_size line") {
    repo.write("configs/train.yaml", train_yaml(64));
    repo.commit("micro-batch 64: does not fit");
    const CheckRun r = check({"configs/", "--base-ref", "HEAD~1", "--format", "github"});
    CAPTURE(r.out);
    CHECK(r.code == 1);
    const Verdict v = judge(estimate(s64), s64);
    REQUIRE(!v.fits);
    CHECK(lines_starting(r.out, "::error").size() == 1);
    CHECK(has_line(r.out, gh(fmt::format("::error file=configs/train.yaml,line=6,col=3,title=memplan::does not fit "
                                         "rtx-3060-12gb: peak {} is {} of {} (out_of_memory), over the 90.0% target by {}; "
                                         "cause: micro-batch 4 -> 64 (+{} peak)",
                                         gib(peak(s64)), percent(v.utilization), gib(s64.device.capacity_bytes),
                                         gib(peak(s64) - target_bytes(s64)), gib(peak(s64) - peak(s2))))));
    // The text report names the term deltas and their cause.
    const CheckRun t = check({"configs/train.yaml", "--base-ref", "HEAD~1"});
    CHECK(t.code == 1);
    const int64_t act = estimate(s64).peak()[Term::activations] - estimate(s2).peak()[Term::activations];
    CHECK(has_line(t.out, fmt::format("        activations +{}: micro-batch 4 -> 64", gib(act))));
    // And the JUnit report fails it.
    const CheckRun j = check({"configs/", "--base-ref", "HEAD~1", "--format", "junit"});
    CHECK(j.code == 1);
    CHECK(count(j.out, "<failure ") == 1);
  }
  SUBCASE("a config that is new at the base revision has no baseline and is judged alone") {
    repo.write("configs/new.yaml", train_yaml(2));
    const CheckRun r = check({"configs/new.yaml", "--base-ref", "HEAD", "--max-growth", "10%"});
    CAPTURE(r.out);
    CHECK(r.code == 0);
    CHECK(has_line(r.out, "      note: new file: not in HEAD, no baseline"));
  }
  SUBCASE("an unknown revision is invalid input for each config") {
    const CheckRun r = check({"configs/train.yaml", "--base-ref", "no-such-branch"});
    CHECK(r.code == 2);
    CHECK(has_line(r.out, "ERROR configs/train.yaml: error: --base-ref: unknown revision 'no-such-branch'"));
  }
  // The baseline's temporary copies are gone.
  for (const auto& e : fs::directory_iterator(repo.dir / "configs"))
    CHECK(e.path().filename().string().rfind(".memplan-base-", 0) == std::string::npos);
}

TEST_CASE("memplan check --base-ref outside a git repository is invalid input") {
  std::string tmpl = (fs::temp_directory_path() / "memplan-nogit-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  std::ofstream(dir / "train.yaml") << train_yaml(2);
  const CheckRun r = check({(dir / "train.yaml").string(), "--base-ref", "HEAD"});
  CHECK(r.code == 2);
  CHECK(lines_starting(r.out, "ERROR " + (dir / "train.yaml").string() + ": error: --base-ref needs a git repository").size() == 1);
  fs::remove_all(dir);
}

}  // namespace
TEST_CASE("memplan check DIR: the training tools' configs are checked, TOML included; pyproject.toml is not one") {
  const fs::path dir = fs::temp_directory_path() / "memplan-check-tools";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string formats = std::string(MEMPLAN_TEST_DATA) + "/formats/";
  fs::copy_file(formats + "torchtitan/qwen3_ddp.toml", dir / "qwen3_ddp.toml");
  fs::copy_file(formats + "litgpt/llama-3.2-1B_lora.yaml", dir / "litgpt_lora.yaml");
  fs::copy_file(formats + "lightning/legacy_values.yaml", dir / "lightning.yaml");
  std::ofstream(dir / "pyproject.toml") << "[project]\nname = \"trainer\"\n";
  const std::string d = dir.lexically_normal().string();
  const CheckRun r = check({d, "--gpu", "a100-80gb"});
  CAPTURE(r.out);
  CHECK(lines_starting(r.out, "PASS  " + d + "/litgpt_lora.yaml  ").size() == 1);
  CHECK(lines_starting(r.out, "PASS  " + d + "/qwen3_ddp.toml  ").size() == 1);
  // A Lightning config names no model: an error, not a skip (the reader's words).
  CHECK(lines_starting(r.out, "ERROR " + d + "/lightning.yaml: error: this Lightning config names no model").size() == 1);
  CHECK(has_line(r.out, "SKIP  " + d + "/pyproject.toml: not a training config: TOML without a [model] table (not a torchtitan "
                        "job config)"));
  CHECK(r.code == 2);
  fs::remove_all(dir);
}

// The tool-format fixtures offline (their Hub ids resolve through the test cache) and a fresh
// folder to copy some of them into.
struct OfflineFormats {
  testing::EnvGuard env;
  const std::string formats = std::string(MEMPLAN_TEST_DATA) + "/formats/";
  fs::path dir;
  explicit OfflineFormats(const char* name) : dir(fs::temp_directory_path() / name) {
    env.set("HF_HUB_CACHE", formats + "hf_cache");
    env.set("HF_HUB_OFFLINE", "1");
    env.unset("HUGGINGFACE_HUB_CACHE");
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~OfflineFormats() { fs::remove_all(dir); }
};

TEST_CASE("memplan check DIR: HF TrainingArguments/TRL and Axolotl configs are checked, not skipped; accelerate's launcher config is") {
  const OfflineFormats o("memplan-check-hf-family");
  const std::string& formats = o.formats;
  const fs::path& dir = o.dir;
  fs::copy_file(formats + "hf-trl/02-trl-qlora-docs-defaults.yaml", dir / "trl_qlora.yaml");
  fs::copy_file(formats + "hf-trl/08-run-clm-defaults.json", dir / "run_clm.json");
  fs::copy_file(formats + "axolotl/01-llama-3.2-1b-qlora.yml", dir / "axolotl_qlora.yml");
  fs::copy_file(formats + "accelerate/06-single-accelerator.yaml", dir / "accelerate.yaml");
  // TrainingArguments without model_name_or_path: a training config that cannot be built.
  std::ofstream(dir / "no_model.yaml") << "per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\nbf16: true\n";
  const std::string d = dir.lexically_normal().string();
  const CheckRun r = check({d, "--gpu", "h100-80gb"});
  CAPTURE(r.out);
  CHECK(lines_starting(r.out, "PASS  " + d + "/trl_qlora.yaml  ").size() == 1);
  CHECK(lines_starting(r.out, "PASS  " + d + "/run_clm.json  ").size() == 1);
  CHECK(lines_starting(r.out, "PASS  " + d + "/axolotl_qlora.yml  ").size() == 1);
  CHECK(has_line(r.out, "ERROR " + d + "/no_model.yaml: error: no model given: this HF TrainingArguments / TRL config does not name "
                        "the model it trains"));
  CHECK(has_line(r.out, "SKIP  " + d + "/accelerate.yaml: not a training config: accelerate launcher config without a model "
                        "(memplan estimate --config FILE --model NAME estimates it)"));
  CHECK(has_line(r.out, "memplan check: 3 configs checked: 3 passed, 0 failed; 1 invalid; 1 skipped"));
  CHECK(r.code == 2);
  fs::remove(dir / "no_model.yaml");
  CHECK(check({d, "--gpu", "h100-80gb", "--strict"}).code == 0);
}

// Issue 26: configs that name a Hub id memplan cannot read offline (LLaMA-Factory's examples name
// Qwen/Qwen3-4B-Instruct-2507) are checked in CI with --model ID=MODEL: the id reads as the preset,
// nothing is fetched.
TEST_CASE("memplan check --model ID=MODEL: a Hub id the configs name reads as that model, offline") {
  auto contains = [](const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; };
  const OfflineFormats o("memplan-check-model-map");
  const std::string& formats = o.formats;
  const fs::path& dir = o.dir;
  fs::copy_file(formats + "llamafactory/qwen3_lora_sft.yaml", dir / "lora.yaml");
  fs::copy_file(formats + "llamafactory/qwen3_lora_sft_otfq.yaml", dir / "qlora.yaml");
  const std::string d = dir.lexically_normal().string();
  const CheckRun unmapped = check({d, "--gpu", "rtx-4090"});
  CHECK(unmapped.code == 2);
  CHECK(contains(unmapped.out, "hint: download it once (huggingface-cli download Qwen/Qwen3-4B-Instruct-2507 config.json) or pass a "
                               "config.json to --model; or memplan's preset qwen3-4b (Qwen/Qwen3-4B)"));
  const CheckRun r = check({d, "--gpu", "rtx-4090", "--model", "Qwen/Qwen3-4B-Instruct-2507=qwen3-4b"});
  CAPTURE(r.out);
  CHECK(lines_starting(r.out, "PASS  " + d + "/lora.yaml  ").size() == 1);
  CHECK(lines_starting(r.out, "PASS  " + d + "/qlora.yaml  ").size() == 1);
  CHECK(r.code == 0);
  const CheckRun bad = check({d, "--model", "qwen3-4b"});
  CHECK(bad.code == 2);
  CHECK(contains(bad.err, "error: --model: cannot read 'qwen3-4b' as ID=MODEL"));
  const CheckRun missing = check({d, "--model", "Qwen/Qwen3-4B-Instruct-2507=no-such-preset"});
  CHECK(missing.code == 2);
  CHECK(contains(missing.err, "error: --model: unknown model 'no-such-preset'"));
}

TEST_CASE("memplan check fails closed: nothing checked is exit 2, --strict or not, unless --allow-empty") {
  const fs::path dir = fs::temp_directory_path() / "memplan-check-empty";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "workflow.yml") << "jobs:\n  test:\n    runs-on: ubuntu-latest\n";
  const std::string d = dir.lexically_normal().string();
  for (const std::vector<std::string>& args : {std::vector<std::string>{d}, std::vector<std::string>{d, "--strict"}}) {
    const CheckRun r = check(args);
    CHECK(r.code == 2);
    CHECK(has_line(r.out, "SKIP  " + d + "/workflow.yml: not a training config: CI workflow (jobs:)"));
    CHECK(has_line(r.out, "memplan check: 0 configs checked: 0 passed, 0 failed; 0 invalid; 1 skipped"));
    CHECK(has_line(r.err, "error: no training config was checked (1 file skipped)"));
    CHECK(has_line(r.err, "hint: name the training configs (a named file that is not one is an error that says why), or pass "
                          "--allow-empty to accept a run that checks none"));
  }
  const CheckRun allowed = check({d, "--allow-empty"});
  CHECK(allowed.code == 0);
  CHECK(allowed.err.empty());
  fs::remove(dir / "workflow.yml");
  const CheckRun none = check({d});  // an empty folder
  CHECK(none.code == 2);
  CHECK(has_line(none.err, "error: no training config was checked (0 files skipped)"));
  CHECK(check({d, "--allow-empty"}).code == 0);
  fs::remove_all(dir);
}

}  // namespace memplan

namespace memplan {

TEST_CASE("check warns, at the config's line, when a setup asks for what its card cannot run; --strict fails on it") {
  const fs::path dir = fs::temp_directory_path() / ("memplan-check-caps-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "t4.yaml").string();
  std::ofstream(path) << "model:\n  name: gpt2\ntraining:\n  batch_size: 1\n  mixed_precision: bf16\nhardware:\n  gpu: t4\n";
  const CheckRun r = check({path});
  CHECK(r.code == 0);
  CHECK(r.out.find(path + ":5:3: warning: bf16: t4") != std::string::npos);
  CHECK(r.out.find("hint: use fp16 instead") != std::string::npos);
  const CheckRun strict = check({path, "--strict"});
  CHECK(strict.code != 0);
  fs::remove_all(dir);
}

}  // namespace memplan

namespace memplan {

TEST_CASE("memplan check --format github: file names cannot forge workflow commands") {
  // A pull request can add a config whose name carries a newline and a workflow command.
  const fs::path dir = fs::temp_directory_path() / "memplan-check-github-names";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string forged = "a\n::error file=forged.yaml,line=1::forged\n::warning title=x::y\n.yaml";
  fs::copy_file(data("fits.yaml"), dir / forged);
  fs::copy_file(data("typo.yaml"), dir / "b%0A::error::z.yaml");
  const CheckRun r = check({dir.string(), "--format", "github"});
  CAPTURE(r.out);
  // Outside the ::stop-commands:: spans every command line is memplan's own.
  std::string stopped;  // the token while commands are off
  int spans = 0, commands = 0;
  for (const std::string& l : lines_of(r.out)) {
    if (!stopped.empty()) {
      if (l == "::" + stopped + "::") stopped.clear();
      continue;
    }
    if (l.rfind("::stop-commands::", 0) == 0) {
      stopped = l.substr(17);
      CHECK(stopped.size() >= 32);  // unguessable
      ++spans;
      continue;
    }
    if (l.rfind("::", 0) == 0) {
      ++commands;
      CHECK(l.find("title=memplan::") != std::string::npos);
      CHECK(l.find("forged") == std::string::npos);  // the name is in file=, escaped
    }
  }
  CHECK(stopped.empty());
  CHECK(spans == 2);
  CHECK(commands >= 2);  // typo.yaml's warning and the summary notice
  // The names inside annotations are escaped properties: no raw newline, ':' or ','.
  for (const std::string& l : lines_starting(r.out, "::warning file=")) CHECK(l.find("b%250A%3A%3Aerror%3A%3Az.yaml") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace memplan

namespace memplan {

// True when `s` is well-formed UTF-8 holding only XML 1.0 characters.
bool xml_chars_only(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
      ++i;
      continue;
    }
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

TEST_CASE("memplan check --format junit: names with control characters and bytes that are not UTF-8 stay well-formed XML") {
  const fs::path dir = fs::temp_directory_path() / "memplan-check-junit-names";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(data("fits.yaml"), dir / "ctl\x01\x1b[31m.yaml");
  fs::copy_file(data("typo.yaml"), dir / "latin1-\xe9\xff.yaml");
  fs::copy_file(data("fits.yaml"), dir / "utf8-\xc3\xa9.yaml");
  const CheckRun r = check({dir.string(), "--format", "junit"});
  CAPTURE(r.out);
  CHECK(r.code == 0);
  CHECK(xml_chars_only(r.out));
  CHECK(r.out.find("ctl\\x01\\x1B[31m.yaml") != std::string::npos);
  CHECK(r.out.find("latin1-\\xE9\\xFF.yaml") != std::string::npos);
  CHECK(r.out.find("utf8-\xc3\xa9.yaml") != std::string::npos);  // valid UTF-8 stays as it is
  fs::remove_all(dir);
}

TEST_CASE("memplan check --base-ref: the file at the base revision is read only up to the config limit (issue 24)") {
  // git show's output goes through a bounded pipe: a 20 MB file committed at the base is refused
  // (it was read whole: 1 GB from a 1.2 MB repository, compressed).
  TempRepo repo;
  std::string big = train_yaml(2) + "# ";
  big.append(20'000'000, 'x');
  repo.write("configs/train.yaml", big + "\n");
  repo.commit("a huge comment");
  repo.write("configs/train.yaml", train_yaml(2));
  InFolder here(repo.dir);
  const auto t0 = std::chrono::steady_clock::now();
  const CheckRun r = check({"configs/train.yaml", "--base-ref", "HEAD"});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CAPTURE(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find("error: at HEAD this file is over the 16777216 bytes memplan reads of a config") != std::string::npos);
  CHECK(secs < 10);
}

}  // namespace memplan
