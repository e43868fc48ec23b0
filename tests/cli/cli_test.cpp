// The command-line contract (DESIGN.md "Command-line contract"), through memplan::cli::run with
// captured streams: exit codes, the versioned JSON/YAML documents and their keys, the fit
// verdict and ladder, the catalogs, explain, and the exact messages for bad input.
// `memplan check` has its own suite (check_test.cpp); `measure` runs real steps elsewhere.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "tests/profiles/local_hub.h"
#include "cli/commands.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(MEMPLAN_TEST_DATA) + "/cli/";
const std::string kExamples = std::string(MEMPLAN_TEST_DATA) + "/../../examples";

struct Run {
  int code = -1;
  std::string out;
  std::string err;
};

// memplan ARGS... with captured stdout and stderr.
Run invoke(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"memplan"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Run r;
  r.code = memplan::cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string line(const std::string& text, int n) {  // 0-based; "" past the end
  std::istringstream in(text);
  std::string l;
  for (int i = 0; i <= n; ++i)
    if (!std::getline(in, l)) return "";
  return l;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string slurp_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse_json(const Run& r) {
  json j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// The estimate --json of the command a plan report says re-checks its file ("re-check it: memplan ...").
json recheck_json(const std::string& report) {
  const size_t at = report.find("re-check it: memplan ");
  REQUIRE(at != std::string::npos);
  std::istringstream cmd(line(report.substr(at + 21), 0));
  std::vector<std::string> recheck;
  for (std::string w; cmd >> w;) recheck.push_back(w);
  recheck.push_back("--json");
  const Run e = invoke(recheck);
  REQUIRE(e.code <= 1);  // 1: does not fit the target, still estimated
  return parse_json(e);
}

// DESIGN.md's term list, in its order (the JSON, the table and explain use these names).
const std::vector<std::string> kTerms = {"weights",     "gradients", "master_weights", "optimizer_states",
                                         "activations", "logits_and_loss", "transient", "workspace",
                                         "cuda_context", "allocator_overhead", "comm_buffers"};
const std::set<std::string> kBands = {"normal", "above_target", "warning", "critical", "emergency", "out_of_memory"};
const std::set<std::string> kPhases = {"forward", "backward", "optimizer_step"};

}  // namespace

// ---- estimate: the versioned document -------------------------------------------------------------

TEST_CASE("estimate --json holds every key of memplan.estimate/v1") {
  const Run r = invoke({"estimate", "--model", "gpt2", "--gpu", "rtx-3090", "--micro-batch", "2", "--seq-len", "512", "--json"});
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const json j = parse_json(r);
  CHECK(j.at("schema") == "memplan.estimate/v1");

  // setup, normalised.
  const json& setup = j.at("setup");
  CHECK(setup.at("precision") == "fp32");
  CHECK(setup.at("optimizer") == "adamw");
  CHECK(setup.at("batch").at("micro_batch") == 2);
  CHECK(setup.at("batch").at("seq_len") == 512);
  CHECK(setup.at("batch").at("grad_accum") == 1);
  CHECK(setup.at("checkpointing") == "none");
  // HF Trainer (the default framework) on torch 2.6: HF models pick SDPA.
  CHECK(setup.at("attention") == "sdpa");
  CHECK(setup.at("parallel").at("zero_stage") == 0);
  CHECK(setup.at("runtime").at("framework") == "hf-trainer");
  CHECK(setup.at("runtime").at("loss") == "standard");
  CHECK(setup.at("sources").at("attention").get<std::string>().rfind("hf-trainer default: transformers", 0) == 0);
  CHECK(setup.at("sources").at("batch.micro_batch") == "--micro-batch");
  CHECK(setup.at("sources").at("optimizer") == "memplan default");
  CHECK(setup.at("model").at("hidden_size") == 768);

  // model: GPT-2 with vocab 50257 has 124,439,808 parameters (HF gpt2 model card).
  const json& model = j.at("model");
  CHECK(model.at("name") == "gpt2");
  CHECK(model.at("parameters") == 124'439'808);
  CHECK(model.at("trainable_parameters") == 124'439'808);

  // per_gpu: the 11 terms in DESIGN.md's order, each with bytes, formula and source.
  const json& per_gpu = j.at("per_gpu");
  const json& terms = per_gpu.at("terms");
  REQUIRE(terms.is_array());
  REQUIRE(terms.size() == kTerms.size());
  int64_t sum = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    CAPTURE(i);
    const json& t = terms[i];
    CHECK(t.at("name") == kTerms[i]);
    REQUIRE(t.at("bytes").is_number_integer());
    CHECK(t.at("bytes").get<int64_t>() >= 0);
    CHECK(t.at("formula").is_string());
    CHECK_FALSE(t.at("formula").get<std::string>().empty());
    CHECK(t.at("source").is_string());
    CHECK_FALSE(t.at("source").get<std::string>().empty());
    sum += t.at("bytes").get<int64_t>();
  }
  const int64_t peak = per_gpu.at("peak_bytes").get<int64_t>();
  CHECK(peak == sum);
  CHECK(peak > 124'439'808LL * 16);  // fp32 AdamW: 16 B/param of model states at least
  const std::string peak_phase = per_gpu.at("peak_phase");
  CHECK(kPhases.count(peak_phase) == 1);
  // The peak phase is the largest of the phases, and each phase's bytes are its terms' sum.
  int64_t largest = 0;
  std::string largest_phase;
  for (const json& ph : per_gpu.at("phases")) {
    int64_t phase_sum = 0;
    for (const auto& [name, bytes] : ph.at("terms").items()) phase_sum += bytes.get<int64_t>();
    CHECK(ph.at("bytes").get<int64_t>() == phase_sum);
    if (phase_sum > largest) {
      largest = phase_sum;
      largest_phase = ph.at("name");
    }
  }
  CHECK(largest == peak);
  CHECK(largest_phase == peak_phase);

  // host and device.
  CHECK(j.at("host").at("terms").is_array());
  CHECK(j.at("device").at("name") == "rtx-3090");
  const int64_t capacity = j.at("device").at("capacity_bytes").get<int64_t>();
  CHECK(capacity == 25'414'860'800);  // the rtx-3090 preset's 24 GiB as the driver reports it

  // verdict: status from the 0.90/0.92/0.95/0.97 bands; exit 0 because it fits.
  const json& v = j.at("verdict");
  CHECK(v.at("fits") == true);
  CHECK(v.at("utilization").get<double>() == doctest::Approx(static_cast<double>(peak) / static_cast<double>(capacity)));
  CHECK(v.at("headroom_bytes").get<int64_t>() == static_cast<int64_t>(0.90 * static_cast<double>(capacity)) - peak);
  CHECK(kBands.count(v.at("status").get<std::string>()) == 1);
  CHECK(v.at("status") == "normal");
}

// The SDPA backend the estimate assumed, with the reason (estimator/attention_kernel.cpp): fp32
// with grouped-query attention on torch 2.11 runs the math kernel; bf16 on the same H200, cuDNN.
TEST_CASE("estimate names the attention kernel it assumed and why") {
  const std::vector<std::string> args = {"estimate", "--model", "smollm2-360m", "--gpu", "h200", "--micro-batch", "4",
                                         "--seq-len", "1024", "--torch-version", "2.11"};
  std::vector<std::string> as_json = args;
  as_json.push_back("--json");
  const json j = parse_json(invoke(as_json));
  CHECK(j.at("attention_kernel").at("name") == "math");
  CHECK(j.at("attention_kernel").at("enable_gqa") == true);
  CHECK(j.at("attention_kernel").at("why").get<std::string>().find("mem-efficient refuses") != std::string::npos);
  std::vector<std::string> bf16 = as_json;
  bf16.insert(bf16.end() - 1, {"--precision", "bf16"});
  CHECK(parse_json(invoke(bf16)).at("attention_kernel").at("name") == "cudnn");
  const Run text = invoke(args);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("note: attention kernel: SDPA math (fp32, head dim 64, enable_gqa (5 K/V heads for 15)") != std::string::npos);
}

TEST_CASE("estimate --yaml is the same document as --json") {
  const std::vector<std::string> args = {"estimate", "--model", "gpt2", "--gpu", "rtx-3090", "--micro-batch", "2", "--seq-len", "512"};
  std::vector<std::string> as_yaml = args, as_json = args;
  as_yaml.push_back("--yaml");
  as_json.push_back("--json");
  const Run y = invoke(as_yaml);
  REQUIRE(y.code == 0);
  const YAML::Node doc = YAML::Load(y.out);
  CHECK(doc["schema"].as<std::string>() == "memplan.estimate/v1");
  CHECK(doc["model"]["parameters"].as<int64_t>() == 124'439'808);
  REQUIRE(doc["per_gpu"]["terms"].IsSequence());
  REQUIRE(doc["per_gpu"]["terms"].size() == kTerms.size());
  for (size_t i = 0; i < kTerms.size(); ++i) CHECK(doc["per_gpu"]["terms"][i]["name"].as<std::string>() == kTerms[i]);
  const json j = parse_json(invoke(as_json));
  CHECK(doc["per_gpu"]["peak_bytes"].as<int64_t>() == j.at("per_gpu").at("peak_bytes").get<int64_t>());
  CHECK(doc["verdict"]["status"].as<std::string>() == j.at("verdict").at("status").get<std::string>());
  CHECK(doc["verdict"]["fits"].as<bool>() == j.at("verdict").at("fits").get<bool>());
  // --json and --yaml exclude each other.
  std::vector<std::string> both = as_json;
  both.push_back("--yaml");
  CHECK(invoke(both).code == 2);
}

TEST_CASE("estimate without a device capacity has an unknown verdict and exits 0") {
  const Run r = invoke({"estimate", "--model", "gpt2", "--json"});
  CHECK(r.code == 0);
  const json j = parse_json(r);
  CHECK(j.at("device").at("capacity_bytes") == 0);
  CHECK(j.at("verdict").at("fits").is_null());
  CHECK(j.at("verdict").at("status") == "unknown");
}

// ---- fit -----------------------------------------------------------------------------------------

TEST_CASE("fit: the issue's acceptance command does not fit and shows a change that fits") {
  const std::vector<std::string> args = {"fit",       "--model",        "llama-3.2-1b", "--gpu",       "rtx-3060-12gb",
                                         "--micro-batch", "4", "--seq-len", "1024",        "--precision", "amp-bf16"};
  const Run r = invoke(args);
  CHECK(r.code == 1);
  CHECK(contains(r.out, "verdict: does not fit"));
  CHECK(contains(r.out, "what makes it fit, fastest first"));
  // At least one change is marked as fitting.
  bool some_fits = false;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("    ", 0) == 0 && l.size() > 4 && (contains(l, "  fits") || contains(l, "% speed"))) some_fits = true;
  CHECK(some_fits);

  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  const Run rj = invoke(with_json);
  CHECK(rj.code == 1);
  const json j = parse_json(rj);
  CHECK(j.at("schema") == "memplan.fit/v1");
  CHECK(j.at("verdict").at("fits") == false);
  CHECK(j.at("verdict").at("status") == "out_of_memory");
  const int64_t capacity = j.at("device").at("capacity_bytes").get<int64_t>();
  const json& options = j.at("options");
  REQUIRE(options.is_array());
  REQUIRE_FALSE(options.empty());
  // Every option fits, says what it changes, and the first is the fastest.
  for (size_t i = 0; i < options.size(); ++i) {
    CAPTURE(i);
    CHECK(options[i].at("fits") == true);
    CHECK(options[i].at("peak_bytes").get<int64_t>() <= static_cast<int64_t>(0.90 * static_cast<double>(capacity)));
    CHECK_FALSE(options[i].at("flags").get<std::string>().empty());
    CHECK_FALSE(options[i].at("changes").empty());
    CHECK(options[i].at("relative_speed").get<double>() <= 1.0 + 1e-9);
  }
  CHECK(options[0].at("relative_speed").get<double>() == doctest::Approx(1.0));
  // Every single change reported lowers the peak.
  for (const json& c : j.at("single"))
    CHECK(c.at("peak_bytes").get<int64_t>() < j.at("per_gpu").at("peak_bytes").get<int64_t>());
  CHECK(j.at("largest_micro_batch") == 0);
}

TEST_CASE("fit --no-liger (or --loss) offers no change with Liger's kernels and says why") {
  const std::vector<std::string> base = {"fit", "--model", "llama-3.2-1b", "--gpu", "rtx-4090", "--micro-batch", "16", "--seq-len", "2048", "--json"};
  auto offers_liger = [](const json& j) {
    for (const char* list : {"single", "options", "training_changes"})
      for (const json& o : j.at(list))
        if (contains(o.at("flags").get<std::string>(), "--liger")) return true;
    return false;
  };
  const Run plain = invoke(base);
  REQUIRE(plain.code == 1);
  CHECK(offers_liger(parse_json(plain)));  // without the flag it is offered: the check below can fail
  std::vector<std::string> args = base;
  args.push_back("--no-liger");
  const Run r = invoke(args);
  REQUIRE(r.code == 1);
  const json j = parse_json(r);
  CHECK_FALSE(offers_liger(j));
  bool said = false;
  for (const json& l : j.at("left_out")) said = said || (l.at("option") == "Liger kernels" && l.at("why") == "--no-liger keeps them off");
  CHECK(said);
  // --loss too: Liger's fused loss would replace the loss asked for (plan does not search it either).
  std::vector<std::string> with_loss = base;
  with_loss.insert(with_loss.end(), {"--loss", "chunked"});
  const Run rl = invoke(with_loss);
  REQUIRE(rl.code == 1);
  const json jl = parse_json(rl);
  CHECK_FALSE(offers_liger(jl));
  said = false;
  for (const json& l : jl.at("left_out"))
    said = said || (l.at("option") == "Liger kernels" && l.at("why") == "--loss chunked: Liger's fused loss would replace it");
  CHECK(said);
}

TEST_CASE("fit: a setup that fits exits 0 and its largest micro-batch is the last that fits") {
  const Run r = invoke({"fit", "--model", "gpt2", "--gpu", "a100-80gb", "--micro-batch", "1", "--seq-len", "256"});
  CHECK(r.code == 0);
  CHECK(contains(r.out, "verdict: fits"));
  CHECK(contains(r.out, "largest micro-batch that fits: "));

  const Run rj = invoke({"fit", "--model", "gpt2", "--gpu", "a100-80gb", "--micro-batch", "1", "--seq-len", "256", "--json"});
  CHECK(rj.code == 0);
  const json j = parse_json(rj);
  CHECK(j.at("verdict").at("fits") == true);
  CHECK(j.at("options").empty());
  const int64_t capacity = j.at("device").at("capacity_bytes").get<int64_t>();
  const int64_t best = j.at("largest_micro_batch").get<int64_t>();
  const int64_t best_peak = j.at("largest_micro_batch_peak_bytes").get<int64_t>();
  CAPTURE(best);
  REQUIRE(best >= 1);
  CHECK(best_peak <= static_cast<int64_t>(0.90 * static_cast<double>(capacity)));

  auto estimate_at = [](int64_t b) {
    return invoke({"estimate", "--model", "gpt2", "--gpu", "a100-80gb", "--micro-batch", std::to_string(b), "--seq-len", "256", "--json"});
  };
  const Run at_best = estimate_at(best);
  CHECK(at_best.code == 0);
  CHECK(parse_json(at_best).at("per_gpu").at("peak_bytes").get<int64_t>() == best_peak);
  const Run one_more = estimate_at(best + 1);
  CHECK(one_more.code == 1);
  const json over = parse_json(one_more);
  CHECK(over.at("verdict").at("fits") == false);
  CHECK(over.at("per_gpu").at("peak_bytes").get<int64_t>() > static_cast<int64_t>(0.90 * static_cast<double>(capacity)));
}

TEST_CASE("fit without a device capacity is invalid input") {
  const Run r = invoke({"fit", "--model", "gpt2"});
  CHECK(r.code == 2);
  CHECK(line(r.err, 0) == "error: --gpu: fit needs a device capacity");
  CHECK(line(r.err, 1) == "hint: pass --gpu PRESET (memplan gpus lists them) or --gpu-memory 12GiB");
}

// ---- catalogs ---------------------------------------------------------------------------------

TEST_CASE("gpus lists at least 30 presets, DESIGN.md's among them") {
  const Run t = invoke({"gpus"});
  CHECK(t.code == 0);
  const Run r = invoke({"gpus", "--json"});
  REQUIRE(r.code == 0);
  const json j = parse_json(r);
  CHECK(j.at("schema") == "memplan.gpus/v1");
  const json& gpus = j.at("gpus");
  CHECK(gpus.size() >= 30);
  std::set<std::string> names;
  for (const json& g : gpus) {
    names.insert(g.at("name").get<std::string>());
    CHECK(g.at("memory_bytes").get<int64_t>() > 0);
    CHECK(g.at("usable_bytes").get<int64_t>() <= g.at("memory_bytes").get<int64_t>());
    CHECK(contains(t.out, g.at("name").get<std::string>()));
  }
  CHECK(contains(t.out, std::to_string(gpus.size()) + " presets"));
  for (const char* n : {"rtx-3060-12gb", "rtx-3090", "rtx-4090", "a10g", "l4", "l40s", "v100-16gb", "v100-32gb", "a100-40gb",
                        "a100-80gb", "h100-80gb", "h200", "mi250x", "mi300x", "rx-6750-xt", "m2-16gb"}) {
    CAPTURE(n);
    CHECK(names.count(n) == 1);
  }
  // Unified memory: the usable share is stated and smaller than the total.
  for (const json& g : gpus)
    if (g.at("name") == "m2-16gb") {
      CHECK(g.at("unified_memory") == true);
      CHECK(g.at("usable_bytes").get<int64_t>() < g.at("memory_bytes").get<int64_t>());
    }
}

TEST_CASE("models lists DESIGN.md's 21 presets with their parameter counts") {
  const Run t = invoke({"models"});
  CHECK(t.code == 0);
  const Run r = invoke({"models", "--json"});
  REQUIRE(r.code == 0);
  const json j = parse_json(r);
  CHECK(j.at("schema") == "memplan.models/v1");
  std::map<std::string, int64_t> params;
  for (const json& m : j.at("models")) params[m.at("name").get<std::string>()] = m.at("parameters").get<int64_t>();
  for (const char* n : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b",
                        "llama-3-70b", "llama-3.1-8b", "llama-3.2-1b", "llama-3.2-3b", "mistral-7b", "mixtral-8x7b",
                        "qwen2.5-0.5b", "qwen2.5-7b", "gemma-2-2b", "phi-3-mini", "bert-base-uncased", "bert-large-uncased",
                        "moe-nano", "llama-3.1-70b", "llama-3.1-405b", "llama-3.3-70b", "qwen3-1.7b", "qwen3-4b", "qwen3-14b",
                        "qwen3-32b", "qwen3-235b-a22b", "deepseek-v3", "gemma-3-1b", "gemma-3-4b", "gemma-3-12b", "gemma-3-27b",
                        "phi-4", "olmo-2-7b", "olmo-2-13b", "mistral-nemo-12b", "mistral-small-24b"}) {
    CAPTURE(n);
    CHECK(params.count(n) == 1);
    CHECK(contains(t.out, n));
  }
  // Golden totals (STYLE.md): GPT-2 124,439,808; Llama-2-7B 6,738,415,616; Mixtral-8x7B
  // 46,702,792,704 (HF num_parameters()).
  CHECK(params["gpt2"] == 124'439'808);
  CHECK(params["llama-2-7b"] == 6'738'415'616);
  CHECK(params["mixtral-8x7b"] == 46'702'792'704);
  // The presets issue 15 added list their counts too (profiles/models/README.md has the sources).
  CHECK(params["llama-3.1-405b"] == 405'853'388'800);
  CHECK(params["deepseek-v3"] == 671'026'404'352);
  CHECK(contains(t.out, "671,026,404,352"));
  // --yaml parses too.
  const Run y = invoke({"models", "--yaml"});
  CHECK(y.code == 0);
  CHECK(YAML::Load(y.out)["models"].size() == j.at("models").size());
  // The mirrors (profiles/models/mirrors.yaml) with the preset each is read as.
  CHECK(contains(t.out, "casperhansen/llama-3-70b-fp16        llama-3-70b (float16)  meta-llama/Meta-Llama-3-70B"));
  bool nous = false;
  for (const json& m : j.at("mirrors"))
    if (m.at("id") == "NousResearch/Meta-Llama-3-8B") nous = m.at("preset") == "llama-3-8b" && contains(m.at("named_by").get<std::string>(), "axolotl");
  CHECK(nous);
}

TEST_CASE("a file naming a mirror's Hub id is estimated offline as its preset, warned; check --model ID=MODEL accepts it") {
  const std::string file = std::string(MEMPLAN_TEST_DATA) + "/formats/axolotl/03-llama-3-70b-qlora-fsdp.yaml";
  memplan::testing::EnvGuard env;
  memplan::testing::TempDir empty;
  env.set("HF_HUB_CACHE", empty.path());
  env.set("HF_HUB_OFFLINE", "1");
  env.set("XDG_CACHE_HOME", empty.path());
  const Run r = invoke({"estimate", "--config", file, "--gpu", "a100-80gb", "--gpus", "2", "--json"});
  REQUIRE(r.code == 0);
  const json j = parse_json(r);
  CHECK(j.dump().find("casperhansen/llama-3-70b-fp16") != std::string::npos);
  CHECK(contains(r.err, "03-llama-3-70b-qlora-fsdp.yaml:3:1: warning: 'casperhansen/llama-3-70b-fp16' is not in the Hugging Face "
                        "cache: read as memplan's preset llama-3-70b"));
  const Run strict = invoke({"check", file, "--gpu", "a100-80gb", "--gpus", "2", "--strict"});
  CHECK(strict.code == 1);
  CHECK(contains(strict.out, "1 warning (--strict fails on warnings)"));
  const Run mapped = invoke({"check", file, "--gpu", "a100-80gb", "--gpus", "2", "--strict", "--model",
                             "casperhansen/llama-3-70b-fp16=llama-3-70b"});
  CHECK(mapped.code == 0);
  CHECK_FALSE(contains(mapped.out, "warning"));
}

// ---- explain ------------------------------------------------------------------------------------

TEST_CASE("explain without a setup prints every term's meaning") {
  const Run r = invoke({"explain"});
  CHECK(r.code == 0);
  for (size_t i = 0; i < kTerms.size(); ++i) {
    CAPTURE(kTerms[i]);
    CHECK(line(r.out, static_cast<int>(i)).rfind(kTerms[i] + ": ", 0) == 0);
  }
  CHECK(contains(r.out, "(pass --model and the setup flags to see each formula with your numbers)"));
  const Run rj = invoke({"explain", "--json"});
  CHECK(rj.code == 0);
  const json j = parse_json(rj);
  CHECK(j.at("schema") == "memplan.explain/v1");
  REQUIRE(j.at("terms").size() == kTerms.size());
  for (size_t i = 0; i < kTerms.size(); ++i) CHECK(j.at("terms")[i].at("name") == kTerms[i]);
}

TEST_CASE("explain activations with a setup prints the per-layer saved tensors") {
  const Run r = invoke({"explain", "activations", "--model", "gpt2", "--micro-batch", "1", "--seq-len", "128", "--attention", "eager"});
  CHECK(r.code == 0);
  CHECK(line(r.out, 0).rfind("activations: ", 0) == 0);
  CHECK(contains(r.out, "  formula: saved tensors per layer"));
  CHECK(contains(r.out, "saved tensors of each layer variant, named after its first layer (one row per storage"));
  CHECK(contains(r.out, "\n  dense layer 0:\n"));
  CHECK(contains(r.out, "\n  head and loss:\n"));
  CHECK(contains(r.out, "total per dense layer 0"));
  // GPT-2's eager attention saves the scores and the softmax output (Korthikanti et al. 2022).
  CHECK(contains(r.out, "bmm q k^T"));
  CHECK(contains(r.out, "softmax"));
  CHECK(contains(r.out, "log_softmax"));
  // Only the asked-for term.
  CHECK_FALSE(contains(r.out, "\nweights: "));
  CHECK_FALSE(contains(r.out, "\ngradients: "));
}

TEST_CASE("explain with an unknown term exits 2 with the terms or the nearest one") {
  const Run nonsense = invoke({"explain", "nonsense"});
  CHECK(nonsense.code == 2);
  CHECK(nonsense.out.empty());
  CHECK(line(nonsense.err, 0) == "error: TERM: unknown term 'nonsense'");
  CHECK(line(nonsense.err, 1) ==
        "hint: terms: weights, gradients, master_weights, optimizer_states, activations, logits_and_loss, transient, "
        "workspace, cuda_context, allocator_overhead, comm_buffers");
  const Run typo = invoke({"explain", "activation"});
  CHECK(typo.code == 2);
  CHECK(line(typo.err, 0) == "error: TERM: unknown term 'activation'");
  CHECK(line(typo.err, 1) == "hint: did you mean 'activations'?");
}

// ---- bad input: exit 2 and the exact message --------------------------------------------------------

TEST_CASE("bad input: exit 2, nothing on stdout, the exact error and hint on stderr") {
  const struct {
    const char* what;
    std::vector<std::string> args;
    std::string first;  // first line of stderr
    std::string hint;   // second line ("" when there is none)
  } table[] = {
      {"unknown flag",
       {"estimate", "--model", "gpt2", "--bogus"},
       "error: unknown flag '--bogus' for memplan estimate",
       "hint: memplan estimate --help lists its flags"},
      {"missing subcommand",
       {},
       "error: A subcommand is required",
       "hint: memplan --help lists the commands; memplan COMMAND --help their flags"},
      {"micro-batch 0", {"estimate", "--model", "gpt2", "--micro-batch", "0"}, "error: --micro-batch: must be at least 1 (got 0)",
       "hint: a size or count: a whole number of 1 or more"},
      {"unknown precision",
       {"estimate", "--model", "gpt2", "--precision", "fp8"},
       "error: --precision: unknown precision 'fp8'",
       "hint: expected one of: fp32, amp-fp16, amp-bf16, bf16, fp16, mixed-fp16, mixed-bf16"},
      {"unknown model",
       {"estimate", "--model", "llama-7b"},
       "error: --model: unknown model 'llama-7b'",
       "hint: did you mean 'llama-2-7b'? (memplan models lists the presets)"},
      {"unknown gpu",
       {"estimate", "--model", "gpt2", "--gpu", "rtx3099"},
       "error: --gpu: unknown GPU 'rtx3099'",
       "hint: did you mean 'rtx-3090'? (memplan gpus lists the presets)"},
      {"unreadable size",
       {"estimate", "--model", "gpt2", "--gpu-memory", "12 gigs"},
       "error: --gpu-memory: cannot read '12 gigs' as a size",
       "hint: write it like 12GiB or 24GB"},
      {"unreadable allocator cap",
       {"estimate", "--model", "gpt2", "--gpu", "h200", "--allocator-cap", "lots"},
       "error: --allocator-cap: cannot read 'lots' as an allocator cap",
       "hint: a size (11GiB, 12GB) or a fraction of the card's memory as set_per_process_memory_fraction takes it (0.5)"},
      {"zero allocator cap",
       {"estimate", "--model", "gpt2", "--gpu", "h200", "--allocator-cap", "0"},
       "error: --allocator-cap: the allocator cap must be above 0 (got '0')",
       "hint: a size (11GiB, 12GB) or a fraction of the card's memory as set_per_process_memory_fraction takes it (0.5)"},
      {"a bare allocator cap above 1",
       {"estimate", "--model", "gpt2", "--gpu", "h200", "--allocator-cap", "12"},
       "error: --allocator-cap: a bare number is a fraction of the card, at most 1 (got '12')",
       "hint: write the unit: 12GiB (12 x 2^30 bytes, what nvidia-smi's MiB add up to) or 12GB (12 x 10^9 bytes, a vendor's spec "
       "sheet); a fraction is 0 to 1, as set_per_process_memory_fraction takes it"},
      {"a byte count as an allocator cap (issue 54: the hint said 11811160064GiB)",
       {"estimate", "--model", "gpt2", "--gpu", "h200", "--allocator-cap", "11811160064"},
       "error: --allocator-cap: a bare number is a fraction of the card, at most 1 (got '11811160064')",
       "hint: write the unit: 11811160064B to keep it in bytes, or 11GiB (11.81GB); a fraction is 0 to 1, as "
       "set_per_process_memory_fraction takes it"},
      {"an allocator cap fraction that rounds to nothing",
       {"estimate", "--model", "gpt2", "--gpu-memory", "1GiB", "--allocator-cap", "0.0000000001"},
       "error: --allocator-cap: the allocator cap must be above 0 (got '0.0000000001')",
       "hint: a size (11GiB, 12GB) or a fraction of the card's memory as set_per_process_memory_fraction takes it (0.5)"},
      {"allocator cap fraction without a card",
       {"estimate", "--model", "gpt2", "--allocator-cap", "0.5"},
       "error: --allocator-cap: a fraction ('0.5') needs the card's memory",
       "hint: pass --gpu PRESET or --gpu-memory SIZE, or give the cap as a size (11GiB)"},
      {"allocator cap on the cpu",
       {"estimate", "--model", "gpt2", "--device", "cpu", "--allocator-cap", "1GiB"},
       "error: --allocator-cap: an allocator cap applies to a CUDA device (the caching allocator's set_per_process_memory_fraction)",
       "hint: leave it out with --device cpu"},
      {"unreadable transformers version",
       {"estimate", "--model", "gpt2", "--transformers-version", "five"},
       "error: --transformers-version: the transformers version must look like 4.52 or 5.17 (got 'five')",
       "hint: the transformers release the job runs: python -c 'import transformers; print(transformers.__version__)'"},
      {"zero stage 4",
       {"estimate", "--model", "gpt2", "--zero", "4"},
       "error: --zero: ZeRO stage must be 0, 1, 2 or 3 (got 4)",
       "hint: DeepSpeed ZeRO has stages 0 to 3"},
      {"every:0",
       {"estimate", "--model", "gpt2", "--checkpointing", "every:0"},
       "error: --checkpointing: unknown checkpointing 'every:0'",
       "hint: expected one of: none, full, selective, selective-op, every:K, layers:I,J,..."},
      {"malformed yaml",
       {"estimate", "--config", kData + "malformed.yaml"},
       kData + "malformed.yaml:6:19: error: end of sequence flow not found",
       "hint: see examples/ for memplan config files; YAML indents with spaces, and quotes text holding ': ' or '#'"},
      {"missing hf_config",
       {"estimate", "--config", kData + "missing_hf_config.yaml"},
       kData + "missing_hf_config.yaml:3:3: error: model.hf_config: '" + kData + "no-such-model/config.json' does not exist",
       "hint: hf_config is relative to this file's folder; it names an HF config.json"},
      {"parameter offload below stage 3",
       {"estimate", "--model", "gpt2", "--offload", "optimizer+params", "--zero", "2"},
       "error: --offload: parameter offload needs ZeRO stage 3 or FSDP",
       "hint: use --zero 3 or --offload optimizer"},
      {"optimizer offload without ZeRO",
       {"fit", "--model", "gpt2", "--gpu", "rtx-3090", "--offload", "optimizer"},
       "error: --offload: optimizer offload needs ZeRO stage 1 or higher, or FSDP",
       "hint: use --zero 2 --offload optimizer"},
      {"unknown device",
       {"estimate", "--model", "gpt2", "--device", "tpu"},
       "error: --device: unknown device 'tpu'",
       "hint: expected one of: cpu, cuda, cuda:N"},
  };
  for (const auto& row : table) {
    CAPTURE(row.what);
    const Run r = invoke(row.args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(line(r.err, 0) == row.first);
    CHECK(line(r.err, 1) == row.hint);
  }
}

TEST_CASE("a value that is not a number exits 2 and names the flag and the value") {
  const Run r = invoke({"estimate", "--model", "gpt2", "--micro-batch", "abc"});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(contains(line(r.err, 0), "--micro-batch"));
  CHECK(contains(line(r.err, 0), "abc"));
}

// DESIGN.md's contract for bad flags is "error: --flag ..." with a hint about the flag.
TEST_CASE("a value that is not a number is reported as error: --flag (DESIGN.md)") {
  const Run r = invoke({"estimate", "--model", "gpt2", "--micro-batch", "abc"});
  CHECK(r.code == 2);
  CHECK(line(r.err, 0) == "error: --micro-batch: cannot read 'abc' as its value");
  CHECK(line(r.err, 1) == "hint: memplan estimate --help shows what --micro-batch takes");
}

// A setup's warnings are printed before an error that comes after the setup is built (here: a model
// torchtune has no builder for).
TEST_CASE("plan prints the config's warnings before a later error") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-warn-then-fail";
  fs::create_directories(dir);
  const std::string cfg = (dir / "run.yaml").string();
  std::ofstream(cfg) << "model:\n  preset: gpt2\ntraining:\n  micro_batch_sizee: 2\n";
  const Run r = invoke({"plan", "--config", cfg, "--gpu", "rtx-3060", "--emit", "torchtune"});
  CHECK(r.code == 2);
  CHECK(contains(r.err, "warning: unknown key 'micro_batch_sizee'"));
  CHECK(contains(r.err, "error: --emit: torchtune has no model of gpt2's architecture"));
  CHECK(r.err.find("warning:") < r.err.find("error:"));
  fs::remove_all(dir);
}

// Issue 25: the flag is found from CLI11's parse state, not its English message; a flag's value
// CLI11 2.1 reads with std::stoll (--liger=maybe) was an internal error (exit 3).
TEST_CASE("a bad value is named at its flag: an option's, a flag's, a number out of range") {
  const Run eq = invoke({"plan", "--model", "gpt2", "--budget=x"});
  CHECK(eq.code == 2);
  CHECK(line(eq.err, 0) == "error: --budget: cannot read 'x' as its value");
  for (const char* v : {"--liger=maybe", "--no-liger=99999999999999999999"}) {
    CAPTURE(v);
    const Run r = invoke({"estimate", "--model", "gpt2", v});
    CHECK(r.code == 2);
    const std::string flag(v, std::string(v).find('='));
    CHECK(line(r.err, 0) == "error: " + flag + ": cannot read '" + std::string(v).substr(flag.size() + 1) + "' as its value");
    CHECK(line(r.err, 1) == "hint: a flag takes true or false (or nothing); memplan estimate --help lists its flags");
  }
  CHECK(invoke({"estimate", "--model", "gpt2", "--liger=true"}).code == 0);
  const Run py = invoke({"estimate", "--model", "gpt2", "--seq_len=128"});
  CHECK(py.code == 2);
  CHECK(line(py.err, 1) == "hint: did you mean '--seq-len'? memplan estimate --help lists its flags");
}

// STYLE.md: unknown names get "did you mean".
TEST_CASE("a misspelt command is named in the error") {
  const Run r = invoke({"estimat", "--model", "gpt2"});
  CHECK(r.code == 2);
  CHECK(line(r.err, 0) == "error: unknown command 'estimat'");
  CHECK(line(r.err, 1) == "hint: did you mean 'estimate'? memplan --help lists the commands");
}

TEST_CASE("a misspelt flag gets the nearest flag of its command") {
  const Run r = invoke({"estimate", "--model", "gpt2", "--micro-bach", "4"});
  CHECK(r.code == 2);
  CHECK(line(r.err, 0) == "error: unknown flag '--micro-bach' for memplan estimate");
  CHECK(line(r.err, 1) == "hint: did you mean '--micro-batch'? memplan estimate --help lists its flags");
}

TEST_CASE("a config file given without --config is pointed at --config") {
  const Run r = invoke({"estimate", "examples/quickstart.yaml"});
  CHECK(r.code == 2);
  CHECK(line(r.err, 0) ==
        "error: memplan estimate reads its configuration file from --config, not a bare argument ('examples/quickstart.yaml')");
  CHECK(line(r.err, 1) == "hint: memplan estimate --config examples/quickstart.yaml");
  const Run other = invoke({"estimate", "--model", "gpt2", "stray"});
  CHECK(other.code == 2);
  CHECK(line(other.err, 1) == "hint: memplan --help lists the commands; memplan estimate --help their flags");
}

// ---- version and help ---------------------------------------------------------------------------

TEST_CASE("--version and --help") {
  const Run v = invoke({"--version"});
  CHECK(v.code == 0);
  CHECK(v.out == std::string(MEMPLAN_VERSION) + "\n");
  const Run h = invoke({"estimate", "--help"});
  CHECK(h.code == 0);
  CHECK(contains(h.out, "--micro-batch"));
  CHECK(contains(h.out, "--precision"));
  CHECK(contains(h.out, "--json"));
  const Run top = invoke({"--help"});
  CHECK(top.code == 0);
  for (const char* c : {"estimate", "fit", "plan", "check", "measure", "calibrate", "gpus", "models", "explain"}) {
    CAPTURE(c);
    CHECK(contains(top.out, c));
  }
}

// ---- measure refuses what it cannot run, before running -------------------------------------------

// measure and calibrate run in the companion memplan-measure (built with LibTorch), found through
// MEMPLAN_EXEC_PATH here; the build tree's one when it was built.
bool companion_built() { return fs::exists(fs::path(MEMPLAN_BUILD_DIR) / "memplan-measure"); }

TEST_CASE("measure and calibrate without the companion: say how to build it, exit 2") {
  const fs::path empty = fs::temp_directory_path() / "memplan-no-companion";
  fs::create_directories(empty);
  setenv("MEMPLAN_EXEC_PATH", empty.c_str(), 1);
  for (const char* cmd : {"measure", "calibrate"}) {
    CAPTURE(cmd);
    const Run r = invoke({cmd, "--device", "cpu"});
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(line(r.err, 0) == std::string("error: memplan ") + cmd +
                                " runs real LibTorch steps in the companion program memplan-measure, which this memplan does not have");
    CHECK(line(r.err, 1).rfind("hint: build memplan with LibTorch: ./dev.sh test installs libtorch-dev", 0) == 0);
  }
  unsetenv("MEMPLAN_EXEC_PATH");
}

TEST_CASE("measure: unknown device and unmeasurable setups exit 2 before any step (through the companion)") {
  if (!companion_built()) return;  // a core-only build: the case above covers it
  setenv("MEMPLAN_EXEC_PATH", MEMPLAN_BUILD_DIR, 1);
  const Run tpu = invoke({"measure", "--device", "tpu", "--model", kData + "tiny-llama.json", "--seq-len", "32"});
  CHECK(tpu.code == 2);
  CHECK(tpu.out.empty());
  CHECK(line(tpu.err, 0) == "error: --device: unknown device 'tpu'");
  CHECK(line(tpu.err, 1) == "hint: expected one of: cpu, cuda, cuda:N");

  const Run mixed = invoke({"measure", "--device", "cpu", "--model", kData + "tiny-llama.json", "--seq-len", "32", "--precision",
                             "mixed-bf16"});
  CHECK(mixed.code == 2);
  CHECK(mixed.out.empty());
  CHECK_FALSE(contains(mixed.err, "[measure"));  // no progress line: nothing ran
  CHECK(line(mixed.err, 0) ==
        "error: --device: cannot measure this setup: mixed-fp16/mixed-bf16 are DeepSpeed's regimes (fp32 master "
        "copies): measure amp-bf16 or bf16 instead");

  // Runtime knobs the harness cannot run are refused, not measured as something else (per-op
  // selective checkpointing once ran as whole-layer checkpointing; the harness runs the per-op
  // policy with eager attention only, and HF's selective policy not at all).
  const Run sac = invoke({"measure", "--device", "cpu", "--model", kData + "tiny-llama.json", "--seq-len", "32",
                          "--checkpointing", "selective-op", "--attention", "sdpa"});
  CHECK(sac.code == 2);
  CHECK_FALSE(contains(sac.err, "[measure"));
  CHECK(contains(line(sac.err, 0), "cannot measure this setup: the per-op policy is measured with eager attention"));
  const Run selective = invoke({"measure", "--device", "cpu", "--model", kData + "tiny-llama.json", "--seq-len", "32",
                                "--checkpointing", "selective"});
  CHECK(selective.code == 2);
  CHECK(contains(line(selective.err, 0), "cannot measure this setup: selective checkpointing is not measured"));
  const Run compiled = invoke({"measure", "--device", "cpu", "--model", kData + "tiny-llama.json", "--seq-len", "32", "--compile"});
  CHECK(compiled.code == 2);
  CHECK(contains(line(compiled.err, 0), "cannot measure this setup: torch.compile is not measured"));

  // --help reaches the companion, which knows measure's own flags.
  const Run help = invoke({"measure", "--help"});
  CHECK(help.code == 0);
  CHECK(contains(help.out, "--steps"));
  unsetenv("MEMPLAN_EXEC_PATH");
}

// ---- examples --------------------------------------------------------------------------------------

TEST_CASE("every examples/*.yaml estimates with a verdict (exit 0 or 1, never 2 or 3)") {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kExamples))
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 6);
  for (const std::string& f : files) {
    CAPTURE(f);
    const Run r = invoke({"estimate", "--config", f, "--json"});
    CAPTURE(r.err);
    CHECK((r.code == 0 || r.code == 1));
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j.at("schema") == "memplan.estimate/v1");
    const json& v = j.at("verdict");
    REQUIRE(v.at("fits").is_boolean());  // every example names its hardware
    CHECK(r.code == (v.at("fits").get<bool>() ? 0 : 1));
    CHECK(kBands.count(v.at("status").get<std::string>()) == 1);
  }
  // The DeepSpeed example needs a model from the command line.
  const Run ds = invoke({"estimate", "--config", kExamples + "/ds_config.json", "--model", "gpt2", "--gpu", "a100-80gb",
                          "--gpus", "8", "--json"});
  CHECK(ds.code == 0);
  const json dj = parse_json(ds);
  CHECK(dj.at("setup").at("parallel").at("zero_stage") == 2);
  CHECK(dj.at("setup").at("batch").at("micro_batch") == 4);
  CHECK(dj.at("setup").at("batch").at("grad_accum") == 8);
}

// ---- performance smoke (not a timing assertion) ----------------------------------------------------

TEST_CASE("estimate of Mixtral-8x7B on 8 x H100 completes") {
  const Run r = invoke({"estimate", "--model", "mixtral-8x7b", "--gpu", "h100-80gb", "--gpus", "8", "--zero", "3", "--json"});
  CHECK((r.code == 0 || r.code == 1));
  const json j = parse_json(r);
  CHECK(j.at("model").at("parameters") == 46'702'792'704);
  CHECK(j.at("setup").at("parallel").at("data_parallel") == 8);
  CHECK(j.at("per_gpu").at("peak_bytes").get<int64_t>() > 0);
}

// ---- plan --emit / --out ---------------------------------------------------------------------------

TEST_CASE("plan --emit prints the config on stdout and the report on stderr; --out writes it, never over a file") {
  const std::vector<std::string> base = {"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--global-batch", "32",
                                         "--seq-len", "1024"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return invoke(a);
  };
  const Run ds = with({"--emit", "deepspeed"});
  REQUIRE(ds.code == 0);
  const json cfg = json::parse(ds.out);  // stdout holds the config alone
  CHECK(cfg.contains("zero_optimization"));
  CHECK(contains(ds.err, "memplan plan: llama-3.2-1b"));
  CHECK(contains(ds.err, "printed the deepspeed config on stdout"));

  const fs::path dir = fs::temp_directory_path() / "memplan-plan-out";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = (dir / "ds_config.json").string();
  const Run w = with({"--emit", "deepspeed", "--out", out});
  REQUIRE(w.code == 0);
  CHECK(contains(w.out, "wrote " + out + " (deepspeed)"));
  CHECK(json::parse(slurp_file(out)) == cfg);
  const Run again = with({"--emit", "deepspeed", "--out", out});
  CHECK(again.code == 2);
  CHECK(line(again.err, 0) == "error: --out: will not write the config '" + out + "': it exists");
  CHECK(with({"--emit", "deepspeed", "--out", out, "--force"}).code == 0);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);  // no temporaries
  // --force never replaces a file the command reads: the --config given is refused as --out.
  const std::string cfg_in = (dir / "in.yaml").string();
  { std::ofstream(cfg_in) << "model: llama-3.2-1b\n"; }
  const Run onto = invoke({"plan", "--config", cfg_in, "--gpu", "a100-40gb", "--global-batch", "32", "--seq-len", "1024",
                           "--emit", "memplan", "--out", cfg_in, "--force"});
  CHECK(onto.code == 2);
  CHECK(line(onto.err, 0) == "error: --out: will not write the config '" + cfg_in + "': it is the file given as --config");
  CHECK(slurp_file(cfg_in) == "model: llama-3.2-1b\n");
  fs::remove(cfg_in);

  const Run no_emit = with({"--out", out});
  CHECK(no_emit.code == 2);
  CHECK(line(no_emit.err, 0) == "error: --out: --out writes the emitted config, and no --emit format was given");
  const Run json_too = with({"--emit", "hf", "--json"});
  CHECK(json_too.code == 2);
  CHECK(line(json_too.err, 1) == "hint: add --out FILE for the config, or drop --json/--yaml");
  const Run bad = with({"--emit", "seed"});
  CHECK(bad.code == 2);
  CHECK(line(bad.err, 1) == "hint: expected one of: memplan, train-config, deepspeed, hf, trl, lightning, torchtune, litgpt, axolotl, accelerate, llamafactory");
  fs::remove_all(dir);
}

TEST_CASE("plan --emit torchtune|litgpt|lightning: the tool's runtime and model, a file that estimates to the same peak") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-tools";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const struct {
    const char* format;
    std::vector<std::string> recheck;  // the flags the report's "re-check it" line adds
  } rows[] = {{"torchtune", {"--gpu", "a100-40gb", "--gpus", "2"}}, {"litgpt", {"--gpu", "a100-40gb"}}, {"lightning", {}}};
  for (const auto& row : rows) {
    CAPTURE(row.format);
    const std::string out = (dir / (std::string(row.format) + ".yaml")).string();
    const Run p = invoke({"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--gpus", "2", "--global-batch", "32", "--seq-len",
                          "1024", "--emit", row.format, "--out", out, "--json"});
    REQUIRE(p.code == 0);
    const json pj = parse_json(p);
    std::vector<std::string> args = {"estimate", "--config", out, "--json"};
    args.insert(args.end(), row.recheck.begin(), row.recheck.end());
    const Run e = invoke(args);
    REQUIRE(e.code == 0);
    const json ej = parse_json(e);
    CHECK(ej.at("setup").at("runtime").at("framework") == row.format);
    CHECK(ej.at("per_gpu").at("peak_bytes") == pj.at("best").at("peak_bytes"));
    CHECK(ej.at("setup").at("batch").at("micro_batch") == pj.at("best").at("micro_batch"));
  }
  // The report says how to re-check a torchtune file (its GPU and count are not in it).
  const Run t = invoke({"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--gpus", "2", "--global-batch", "32", "--seq-len",
                        "1024", "--emit", "torchtune", "--out", (dir / "t2.yaml").string()});
  CHECK(contains(t.out, "re-check it: memplan estimate --config " + (dir / "t2.yaml").string() + " --gpu a100-40gb --gpus 2"));
  // A model torchtune has no builder for.
  const Run gpt2 = invoke({"plan", "--model", "gpt2", "--gpu", "a100-40gb", "--global-batch", "8", "--emit", "torchtune"});
  CHECK(gpt2.code == 2);
  CHECK(line(gpt2.err, 0) == "error: --emit: torchtune has no model of gpt2's architecture");
  fs::remove_all(dir);
}

// ---- plan: what it prints is what it writes (issue 14) -------------------------------------------

// The "re-check it: memplan estimate --config FILE ..." line of a plan report, as arguments.
std::vector<std::string> recheck_args(const std::string& report) {
  const std::string key = "re-check it: memplan ";
  const size_t at = report.find(key);
  REQUIRE(at != std::string::npos);
  std::istringstream in(report.substr(at + key.size(), report.find('\n', at) - at - key.size()));
  std::vector<std::string> a;
  for (std::string w; in >> w;) a.push_back(w);
  return a;
}

TEST_CASE("plan --emit: every format's file re-estimates within 0.5% of the plan's peak, with and without a fixed precision") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-roundtrip";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string fmt_name : {"memplan", "train-config", "deepspeed", "hf", "trl", "lightning", "torchtune", "litgpt", "axolotl",
                                       "accelerate", "llamafactory"})
    for (const std::vector<std::string>& extra : {std::vector<std::string>{}, std::vector<std::string>{"--precision", "amp-bf16"}}) {
      CAPTURE(fmt_name);
      CAPTURE(extra.size());
      const std::string out = (dir / (fmt_name + std::to_string(extra.size()) + ".cfg")).string();
      std::vector<std::string> a = {"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--gpus", "2", "--global-batch", "32",
                                    "--seq-len", "1024", "--emit", fmt_name, "--out", out};
      a.insert(a.end(), extra.begin(), extra.end());
      const Run text = invoke(a);
      if (fmt_name == "torchtune" && !extra.empty()) {  // torchtune has no autocast: nothing it can run fits (exit 1), said with the way out
        CHECK(text.code == 1);
        CHECK(contains(text.out, "--emit torchtune cannot express any configuration that fits (torchtune cannot run precision amp-bf16: "
                                 "torchtune trains in dtype bf16 or fp32 (no autocast, no fp32 master copy); plan with --precisions bf16,fp32)"));
        continue;
      }
      REQUIRE(text.code == 0);
      std::vector<std::string> aj = a;
      aj.insert(aj.end(), {"--force", "--json"});
      const Run pj = invoke(aj);
      REQUIRE(pj.code == 0);
      const int64_t planned = parse_json(pj).at("best").at("peak_bytes").get<int64_t>();
      std::vector<std::string> check = recheck_args(text.out);
      check.push_back("--json");
      const Run e = invoke(check);
      CAPTURE(e.err);
      REQUIRE(e.code != 2);
      const int64_t again = parse_json(e).at("per_gpu").at("peak_bytes").get<int64_t>();
      CHECK(std::llabs(again - planned) <= planned / 200);
    }
  fs::remove_all(dir);
}

// Issue 26: a file's bitsandbytes optimizer steps on the GPU, so no offload plan could keep it;
// plan said "cannot fit" where AdamW with ZeRO offload fits. AdamW is now tried beside it.
TEST_CASE("plan tries AdamW beside a file's paged 8-bit optimizer, for the offload plans") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-paged";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cfg = (dir / "trl.yaml").string();
  std::ofstream(cfg) << "model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 4\n"
                        "max_length: 2048\nbf16: true\noptim: paged_adamw_8bit\ngradient_checkpointing: true\n";
  const Run r = invoke({"plan", "--config", cfg, "--gpu", "rtx-4090", "--global-batch", "4", "--json"});
  REQUIRE(r.code == 0);
  const json best = parse_json(r).at("best");
  CHECK(best.at("optimizer") == "adamw");
  CHECK(best.at("offload") != "none");
  // Asked for by flag, the optimizer stays what it is: then nothing fits on one 4090.
  const Run fixed = invoke({"plan", "--config", cfg, "--gpu", "rtx-4090", "--global-batch", "4", "--optimizer", "paged-adamw-8bit"});
  CHECK(fixed.code == 1);
  fs::remove_all(dir);
}

// Issue 26: a size is said back beside the bytes it means (12GB and 12GiB differ by 7%).
TEST_CASE("estimate says --gpu-memory back as given, with its bytes") {
  const Run gb = invoke({"estimate", "--model", "gpt2", "--gpu-memory", "12GB"});
  REQUIRE(gb.code != 2);
  CHECK(contains(gb.out, "  device: custom, 11.18 GiB (--gpu-memory 12GB = 12,000,000,000 bytes)"));
  const Run gib = invoke({"estimate", "--model", "gpt2", "--gpu-memory", "12GiB"});
  CHECK(contains(gib.out, "  device: custom, 12.00 GiB (--gpu-memory 12GiB = 12,884,901,888 bytes)"));
  const Run preset = invoke({"estimate", "--model", "gpt2", "--gpu", "rtx-3090"});
  CHECK(contains(preset.out, "  device: rtx-3090, 23.67 GiB;"));  // a preset's capacity is not a flag's
}

TEST_CASE("plan takes the global batch from micro-batch x accumulation x GPUs when --global-batch is not given") {
  const Run r = invoke({"plan", "--model", "gpt2", "--gpu", "a100-40gb", "--gpus", "2", "--micro-batch", "4", "--grad-accum", "8",
                        "--seq-len", "512", "--json"});
  REQUIRE(r.code == 0);
  const json j = parse_json(r);
  CHECK(j.at("request").at("global_batch") == 64);
  const Run none = invoke({"plan", "--model", "gpt2", "--gpu", "a100-40gb", "--seq-len", "512"});
  CHECK(none.code == 2);
  CHECK(contains(none.err, "hint: "));
}

TEST_CASE("plan and estimate: bad host memory and contradictory constraints are input errors") {
  const Run zero = invoke({"estimate", "--model", "gpt2", "--gpu", "t4", "--host-memory", "0"});
  CHECK(zero.code == 2);
  CHECK(line(zero.err, 0).rfind("error: --host-memory: ", 0) == 0);
  CHECK(line(zero.err, 1).rfind("hint: ", 0) == 0);
  const Run both = invoke({"plan", "--model", "gpt2", "--gpu", "a100-40gb", "--gpus", "2", "--global-batch", "16", "--zero", "3",
                           "--no-deepspeed"});
  CHECK(both.code == 2);
  CHECK(line(both.err, 0).rfind("error: --no-deepspeed: ", 0) == 0);
  CHECK(line(both.err, 1).rfind("hint: ", 0) == 0);
  const Run table = invoke({"plan", "--model", "gpt2", "--global-batch", "16", "--table", "8GiB,nonsense"});
  CHECK(table.code == 2);
  CHECK(line(table.err, 0).rfind("error: --table: ", 0) == 0);
}

TEST_CASE("estimate states host memory per GPU and per node") {
  const Run r = invoke({"estimate", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--gpus", "8", "--zero", "2", "--offload",
                        "optimizer", "--host-memory", "512GiB", "--precision", "mixed-bf16"});
  REQUIRE(r.code != 2);
  CHECK(contains(r.out, "per GPU"));
  CHECK(contains(r.out, "per node"));
}

TEST_CASE("plan states the host memory an offload plan needs, per GPU and per node, and that the node's RAM is unknown") {
  const Run r = invoke({"plan", "--model", "llama-3-70b", "--gpu", "t4", "--global-batch", "8", "--seq-len", "1024"});
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "per GPU"));
  CHECK(contains(r.out, "per node"));
  CHECK(contains(r.out, "--host-memory"));
  const Run refused = invoke({"plan", "--model", "llama-3-70b", "--gpu", "t4", "--global-batch", "8", "--seq-len", "1024",
                              "--host-memory", "256GiB"});
  CHECK(refused.code == 1);
  CHECK(contains(refused.out + refused.err, "host RAM"));
}

TEST_CASE("plan --zero 0 plans without DeepSpeed (DDP or FSDP); --zero 1 keeps ZeRO-1") {
  for (const char* z : {"0", "1"}) {
    CAPTURE(z);
    const Run r = invoke({"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--gpus", "8", "--global-batch", "64", "--seq-len",
                          "1024", "--zero", z, "--json"});
    REQUIRE(r.code == 0);
    const json j = parse_json(r);
    CHECK(j.at("best").at("zero_stage") == std::stoi(z));
  }
}

TEST_CASE("plan reads the global batch from a config's batch x accumulation x GPUs") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-gb";
  fs::create_directories(dir);
  const std::string path = (dir / "sft.yaml").string();
  std::ofstream(path) << "model_name_or_path: gpt2\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 8\nmax_length: 512\n";
  const Run r = invoke({"plan", "--config", path, "--gpu", "a100-40gb", "--gpus", "2", "--json"});
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const json j = parse_json(r);
  CHECK(j.at("request").at("global_batch") == 64);
  CHECK(j.at("request").at("global_batch_source") == "micro-batch x accumulation x GPUs as given");
  const Run text = invoke({"plan", "--config", path, "--gpu", "a100-40gb", "--gpus", "2"});
  CHECK(contains(text.out, "global batch 64 from micro-batch x accumulation x GPUs as given"));
  fs::remove_all(dir);
}

TEST_CASE("plan --table prints one plan per memory size as a markdown table") {
  const Run r = invoke({"plan", "--model", "qwen2.5-0.5b", "--global-batch", "16", "--seq-len", "1024", "--table", "8GiB,12GiB,16GiB,24GiB"});
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "| GPU memory | Micro-batch | Gradient accumulation | Other optimizations | Peak |"));
  for (const char* row : {"| 8 GiB |", "| 12 GiB |", "| 16 GiB |", "| 24 GiB |"}) CHECK(contains(r.out, row));
  // Each row's plan is plan's own for that size: the 24 GiB row equals `plan --gpu-memory 24GiB`.
  const Run one = invoke({"plan", "--model", "qwen2.5-0.5b", "--global-batch", "16", "--seq-len", "1024", "--gpu-memory", "24GiB", "--json"});
  REQUIRE(one.code == 0);
  const json j = parse_json(one);
  const std::string want = fmt::format("| 24 GiB | {} | {} |", j.at("best").at("micro_batch").get<int64_t>(),
                                       j.at("best").at("grad_accum").get<int64_t>());
  CHECK(contains(r.out, want));
}

TEST_CASE("plan --table for a 7B QLoRA fine-tune: every row is plan's own for that size, none offloads for a rounding gain") {
  const std::vector<std::string> base = {"plan", "--model", "mistral-7b", "--finetune", "qlora", "--seq-len", "2048", "--global-batch", "16"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--table", "8GiB,12GiB,16GiB,24GiB"});
  const Run r = invoke(args);
  REQUIRE(r.code == 0);
  CHECK_FALSE(contains(r.out, "offload"));
  CHECK_FALSE(contains(r.out, "ZeRO"));
  for (const char* size : {"8GiB", "12GiB", "16GiB", "24GiB"}) {
    CAPTURE(size);
    std::vector<std::string> one = base;
    one.insert(one.end(), {"--gpu-memory", size, "--json"});
    const Run o = invoke(one);
    REQUIRE(o.code == 0);
    const json b = parse_json(o).at("best");
    CHECK(b.at("peak_bytes").get<int64_t>() <= (int64_t(std::stoi(size)) << 30) * 9 / 10);
    const std::string shown = std::string(size).substr(0, std::string(size).size() - 3) + " GiB";
    CHECK(contains(r.out, fmt::format("| {} | {} | {} |", shown, b.at("micro_batch").get<int64_t>(), b.at("grad_accum").get<int64_t>())));
  }
}

TEST_CASE("plan keeps a config's FSDP stack: DeepSpeed only when --zero N --fsdp none asks for it") {
  const std::string cfg = std::string(MEMPLAN_TEST_DATA) + "/formats/hf-trl/03-run-clm-fsdp.json";
  const Run r = invoke({"plan", "--config", cfg, "--gpu", "a100-40gb", "--gpus", "4", "--json"});
  REQUIRE(r.code == 0);
  const json j = parse_json(r);
  CHECK(j.at("best").at("zero_stage").get<int>() == 0);
  CHECK(contains(j.at("left_out").dump(), "the config runs FSDP full; pass --zero N --fsdp none to plan DeepSpeed instead"));
  const Run z = invoke({"plan", "--config", cfg, "--gpu", "a100-40gb", "--gpus", "4", "--zero", "3", "--fsdp", "none", "--json"});
  REQUIRE(z.code == 0);
  CHECK(parse_json(z).at("best").at("zero_stage").get<int>() == 3);
}

TEST_CASE("plan --emit hf|deepspeed searches what plan without --emit searches; a tool's format says it plans for the tool") {
  const std::vector<std::string> base = {"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--gpus", "2", "--global-batch", "32",
                                         "--seq-len", "1024", "--json"};
  const Run plain = invoke(base);
  REQUIRE(plain.code == 0);
  const int64_t n = parse_json(plain).at("search").at("candidates").get<int64_t>();
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-same-search";
  fs::create_directories(dir);
  for (const char* f : {"hf", "deepspeed", "memplan"}) {
    CAPTURE(f);
    std::vector<std::string> a = base;
    a.insert(a.end(), {"--emit", f, "--out", (dir / f).string(), "--force"});
    const Run r = invoke(a);
    REQUIRE(r.code == 0);
    CHECK(parse_json(r).at("search").at("candidates").get<int64_t>() == n);
  }
  const Run l = invoke({"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--global-batch", "16", "--seq-len", "1024", "--emit",
                        "lightning", "--out", (dir / "l.yaml").string(), "--force"});
  REQUIRE(l.code == 0);
  CHECK(contains(l.out, "planned for lightning's runtime (--emit lightning; --framework overrides it)"));
  fs::remove_all(dir);
}

TEST_CASE("plan --emit lightning writes one runtime section in its memplan block") {
  const Run r = invoke({"plan", "--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--global-batch", "16", "--seq-len", "1024", "--emit",
                        "lightning"});
  REQUIRE(r.code == 0);
  size_t n = 0;
  for (size_t at = r.out.find("runtime:"); at != std::string::npos; at = r.out.find("runtime:", at + 1)) ++n;
  CHECK(n == 1);
  CHECK(contains(r.out, "\n# runtime:\n#   framework: lightning\n"));
}

TEST_CASE("plan --config an HF/TRL or Axolotl file --emit hf|axolotl|accelerate: the global batch it implies, and a file that reads back") {
  memplan::testing::EnvGuard env;  // the fixtures' Hub ids resolve through the test cache, offline
  const std::string formats = std::string(MEMPLAN_TEST_DATA) + "/formats/";
  env.set("HF_HUB_CACHE", formats + "hf_cache");
  env.set("HF_HUB_OFFLINE", "1");
  env.unset("HUGGINGFACE_HUB_CACHE");
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-from-configs";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const struct {
    const char* config;
    int64_t global_batch;  // per_device x accumulation x 4 GPUs
  } rows[] = {
      {"hf-trl/01-zephyr-7b-sft-qlora.yaml", 4 * 2 * 4},      // QLoRA without nested quantization (TRL's default)
      {"axolotl/01-llama-3.2-1b-qlora.yml", 2 * 4 * 4},       // a Hub id through the cache
      {"axolotl/02-llama-3.1-8b-fft-liger-fsdp.yaml", 1 * 8 * 4},
  };
  for (const auto& row : rows) {
    for (const char* format : {"hf", "axolotl", "accelerate"}) {
      CAPTURE(row.config);
      CAPTURE(format);
      const std::string out = (dir / (std::string(format) + ".yaml")).string();
      std::vector<std::string> args = {"plan",  "--config", formats + row.config, "--gpu", "a100-80gb", "--gpus", "4",
                                       "--emit", format,     "--out",             out,     "--force"};
      const Run text = invoke(args);
      REQUIRE(text.code == 0);
      args.push_back("--json");
      const Run p = invoke(args);
      REQUIRE(p.code == 0);
      const json best = parse_json(p).at("best");
      CHECK(best.at("global_batch") == row.global_batch);
      const size_t at = text.out.find("re-check it: memplan ");
      REQUIRE(at != std::string::npos);
      std::istringstream cmd(line(text.out.substr(at + 21), 0));
      std::vector<std::string> recheck;
      for (std::string w; cmd >> w;) recheck.push_back(w);
      CHECK(std::find(recheck.begin(), recheck.end(), "NAME") == recheck.end());  // the model is named
      recheck.push_back("--json");
      const Run e = invoke(recheck);
      REQUIRE(e.code == 0);
      const json ej = parse_json(e);
      const json in = parse_json(invoke({"estimate", "--config", formats + row.config, "--gpu", "a100-80gb", "--gpus", "4", "--json"}));
      CHECK(ej.at("per_gpu").at("peak_bytes") == best.at("peak_bytes"));
      CHECK(ej.at("setup").at("finetune") == in.at("setup").at("finetune"));
      CHECK(ej.at("setup").at("model").at("name") == in.at("setup").at("model").at("name"));
      CHECK(ej.at("setup").at("batch").at("seq_len") == in.at("setup").at("batch").at("seq_len"));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("plan --emit hf|axolotl|accelerate|llamafactory: the file and its header's re-check command estimate to the plan's setup and peak") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-hf-family";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // DDP+ZeRO on two GPUs, QLoRA on one 24 GiB card, LoRA on an fp16-only card, FSDP on eight.
  const std::vector<std::vector<std::string>> plans = {
      {"--model", "llama-3.2-1b", "--gpu", "a100-40gb", "--gpus", "2", "--global-batch", "32", "--seq-len", "1024"},
      {"--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--global-batch", "16", "--seq-len", "2048", "--finetune", "qlora",
       "--lora-rank", "16"},
      {"--model", "llama-3.2-1b", "--gpu", "t4", "--global-batch", "8", "--seq-len", "1024", "--finetune", "lora"},
      {"--model", "llama-3.1-8b", "--gpu", "h100-80gb", "--gpus", "8", "--global-batch", "64", "--seq-len", "4096", "--fsdp",
       "full_shard"},
  };
  for (const char* format : {"hf", "trl", "axolotl", "accelerate", "llamafactory"}) {
    for (size_t i = 0; i < plans.size(); ++i) {
      CAPTURE(format);
      CAPTURE(i);
      const std::string out = (dir / (std::string(format) + std::to_string(i) + ".yaml")).string();
      std::vector<std::string> args = {"plan"};
      args.insert(args.end(), plans[i].begin(), plans[i].end());
      for (const char* a : {"--emit", format, "--out", out.c_str(), "--force"}) args.push_back(a);
      const Run text = invoke(args);
      if (std::string(format) == "llamafactory" && i == 3) {  // FSDP: LLaMA-Factory takes it from an accelerate config
        CHECK(text.code == 1);
        CHECK(contains(text.out, "cannot fit: --emit llamafactory cannot express any configuration that fits (LLaMA-Factory runs "
                                 "FSDP through an accelerate config: plan with --emit accelerate)"));
        CHECK_FALSE(fs::exists(out));
        continue;
      }
      REQUIRE(text.code == 0);
      args.push_back("--json");
      const Run p = invoke(args);
      REQUIRE(p.code == 0);
      const json best = parse_json(p).at("best");
      // The report's re-check command, as the emitted file's header states it.
      const size_t at = text.out.find("re-check it: memplan ");
      REQUIRE(at != std::string::npos);
      std::istringstream cmd(line(text.out.substr(at + 21), 0));
      std::vector<std::string> recheck;
      for (std::string w; cmd >> w;) recheck.push_back(w);
      REQUIRE(recheck.size() >= 3);
      CHECK(recheck[0] == "estimate");
      CHECK(recheck[2] == out);
      recheck.push_back("--json");
      const Run e = invoke(recheck);
      REQUIRE(e.code == 0);
      const json ej = parse_json(e);
      const json& s = ej.at("setup");
      CHECK(ej.at("per_gpu").at("peak_bytes") == best.at("peak_bytes"));
      CHECK(s.at("batch").at("micro_batch") == best.at("micro_batch"));
      CHECK(s.at("batch").at("grad_accum") == best.at("grad_accum"));
      CHECK(s.at("precision") == best.at("precision"));
      CHECK(s.at("attention") == best.at("attention"));
      CHECK(s.at("checkpointing") == best.at("checkpointing"));
      CHECK(s.at("optimizer") == best.at("optimizer"));
      CHECK(s.at("parallel").at("zero_stage") == best.at("zero_stage"));
      CHECK(s.at("parallel").at("offload") == best.at("offload"));
      CHECK(s.at("parallel").at("num_gpus") == (i == 0 ? 2 : i == 3 ? 8 : 1));
      CHECK(s.at("finetune").at("mode") == (i == 1 ? "qlora" : i == 2 ? "lora" : "full"));
      if (i == 1) CHECK(s.at("finetune").at("lora_rank") == 16);
      CHECK(ej.at("warnings").empty());
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("running out of memory is an input problem (exit 2), not an internal error") {
  // A command whose work cannot be allocated: what an input of absurd size would do if a bound
  // were missing. run_app maps it to exit 2 with a message about the input's size.
  const std::vector<memplan::cli::Registrar> table = {
      {"grow", [](CLI::App& root, memplan::cli::Io) -> memplan::cli::Command {
         return {root.add_subcommand("grow", "allocates without bound"), []() -> int { throw std::bad_alloc(); }};
       },
       "  memplan grow"}};
  const char* argv[] = {"memplan", "grow"};
  std::ostringstream out, err;
  CHECK(memplan::cli::run_app(table, 2, argv, out, err) == 2);
  CHECK(out.str().empty());
  CHECK(line(err.str(), 0) == "error: out of memory: the input is too large for memplan to handle");
  CHECK(line(err.str(), 1).rfind("hint: ", 0) == 0);
}

// Issue 28's acceptance case: Qwen2.5-0.5B amp-bf16, micro-batch 4 x 1024, full checkpointing, under
// an 11 GiB allocator cap on the H200 (torch 2.11): the GPU ran micro-batch 1 and ran out at 2
// (tests/data/gpu/traces/trace-l-qwen05-amp-gc-cap11GiB-b*.json.gz).
TEST_CASE("fit under an allocator cap says the micro-batch the capped H200 ran") {
  const std::vector<std::string> args = {"fit", "--model", "qwen2.5-0.5b", "--precision", "amp-bf16", "--checkpointing", "full",
                                         "--seq-len", "1024", "--micro-batch", "4", "--gpu", "h200", "--torch-version", "2.11",
                                         "--attention", "sdpa", "--allocator-cap", "11GiB"};
  const Run r = invoke(args);
  CHECK(r.code == 1);
  CHECK(r.out.find("the caching allocator capped at 11.00 GiB (set_per_process_memory_fraction)") != std::string::npos);
  CHECK(r.out.find("largest micro-batch that fits: 1 (") != std::string::npos);
  std::vector<std::string> json = args;
  json.push_back("--json");
  const Run j = invoke(json);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["largest_micro_batch"] == 1);
  CHECK(doc["largest_micro_batch_that_runs"] == 1);
  CHECK(doc["verdict"]["runs"] == false);
  CHECK(doc["device"]["allocator_cap_bytes"] == int64_t{11} << 30);
  // Micro-batch 1 fits: its replay runs within the target's share with the cache squeezed.
  std::vector<std::string> one = args;
  one[10] = "1";
  const Run f = invoke(one);
  CHECK(f.code == 0);
  CHECK(f.out.find("but the step runs within the 90.0% target") != std::string::npos);
}

// Above the target but within the card: "runs", not "does not fit" (issue 26's 90.4% run); the
// quickstart at micro-batch 4 runs only with the allocator's cache squeezed into the whole card.
TEST_CASE("fit: a step that runs above the target says it runs, and the largest micro-batch that runs") {
  const Run r = invoke({"fit", "--config", std::string(MEMPLAN_TEST_DATA) + "/../../examples/quickstart.yaml", "--micro-batch", "4",
                        "--grad-accum", "8"});
  CHECK(r.code == 1);
  CHECK(contains(r.out, "verdict: runs, above the 90.0% target: "));
  CHECK(contains(r.out, "only with the allocator's cache squeezed into the whole card"));
  CHECK(contains(r.out, "largest micro-batch that runs at all (no headroom: the allocator replay's out-of-memory boundary): 4"));
}

// The command line says what it takes (issue 26): a size without its unit is refused (12 was 12
// bytes), a GPU model name that fits several cards lists them instead of picking the smallest, and
// Python's --seq_len is pointed at --seq-len by its own name.
// The estimate's header names every parallel degree that applies (issue 54: PP was left out).
TEST_CASE("estimate's header names pipeline and expert parallelism beside TP") {
  Run r = invoke({"estimate", "--model", "llama-3-8b", "--gpu", "a100-80gb", "--gpus", "4", "--pipeline-parallel", "2"});
  CHECK(contains(line(r.out, 1), ", 4 GPUs, PP 2"));
  r = invoke({"estimate", "--model", "llama-3-8b", "--gpu", "a100-80gb", "--gpus", "4", "--tensor-parallel", "2", "--pipeline-parallel", "2"});
  CHECK(contains(line(r.out, 1), ", 4 GPUs, TP 2, PP 2"));
  r = invoke({"estimate", "--model", "llama-3-8b", "--gpu", "a100-80gb", "--gpus", "4"});
  CHECK_FALSE(contains(line(r.out, 1), "PP"));
}

// One meaning for a size everywhere (issue 55): a bare number is refused with the flags' hint in
// a config's hardware: sizes (24 and 24e9 were bytes there), in plan --table (12 was a 12-byte
// card) and in check --gpu-memory, as at every size flag.
TEST_CASE("sizes need units in files, plan --table and check as at the flags") {
  memplan::testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string small = write("small.yaml", "model:\n  preset: gpt2\nhardware:\n  gpu_memory: 12\n");
  Run r = invoke({"estimate", "--config", small});
  CHECK(r.code == 2);
  CHECK(r.err == small + ":4:3: error: hardware.gpu_memory: '12' has no unit (it would be 12 bytes)\nhint: write the unit: 12GiB (12 x "
                         "2^30 bytes, what nvidia-smi's MiB add up to) or 12GB (12 x 10^9 bytes, a vendor's spec sheet)\n");
  const std::string exp = write("exp.yaml", "model:\n  preset: gpt2\nhardware:\n  gpu: t4\n  host_memory: 64e9\n");
  r = invoke({"fit", "--config", exp});
  CHECK(r.code == 2);
  CHECK(contains(r.err, ":5:3: error: hardware.host_memory: '64e9' has no unit (it would be 64e9 bytes)\nhint: write the unit: 64GB (64 x "
                        "10^9 bytes) or 59.6GiB (59.6 x 2^30 bytes)\n"));
  const std::string unit = write("unit.yaml", "model:\n  preset: gpt2\nhardware:\n  gpu_memory: 12GiB\n");
  CHECK(contains(invoke({"estimate", "--config", unit}).out, "device: custom, 12.00 GiB"));
  r = invoke({"plan", "--model", "gpt2", "--table", "24GiB,12", "--global-batch", "8"});
  CHECK(r.code == 2);
  CHECK(contains(r.err, "error: --table: '12' has no unit (it would be 12 bytes)\nhint: write the unit: 12GiB"));
  r = invoke({"check", unit, "--gpu-memory", "16"});
  CHECK(r.code == 2);
  CHECK(contains(r.err, "error: --gpu-memory: '16' has no unit (it would be 16 bytes)\nhint: write the unit: 16GiB"));
}

TEST_CASE("flags: sizes need units, ambiguous GPU names list their cards, underscores find their flag") {
  const Run bare = invoke({"estimate", "--model", "gpt2", "--gpu-memory", "12"});
  CHECK(bare.code == 2);
  CHECK(bare.err == "error: --gpu-memory: '12' has no unit (it would be 12 bytes)\nhint: write the unit: 12GiB (12 x 2^30 bytes, "
                    "what nvidia-smi's MiB add up to) or 12GB (12 x 10^9 bytes, a vendor's spec sheet)\n");
  CHECK(invoke({"fit", "--model", "gpt2", "--gpu", "t4", "--host-memory", "64"}).code == 2);
  CHECK(contains(invoke({"estimate", "--model", "gpt2", "--gpu-memory", "12GB"}).out, "device: custom, 11.18 GiB"));
  CHECK(contains(invoke({"estimate", "--model", "gpt2", "--gpu-memory", "12GiB"}).out, "device: custom, 12.00 GiB"));
  const Run a100 = invoke({"estimate", "--model", "gpt2", "--gpu", "a100"});
  CHECK(a100.code == 2);
  CHECK(a100.err == "error: --gpu: 'a100' names 2 GPUs: a100-40gb, a100-80gb\nhint: name the one you have (its memory differs): "
                    "memplan gpus lists them\n");
  CHECK(contains(invoke({"estimate", "--model", "gpt2", "--gpu", "H100"}).err, "'H100' names 3 GPUs: h100-80gb, h100-pcie, h100-nvl"));
  const Run us = invoke({"estimate", "--model", "gpt2", "--seq_len", "128"});
  CHECK(us.code == 2);
  CHECK(us.err == "error: unknown flag '--seq_len' for memplan estimate\nhint: did you mean '--seq-len'? memplan estimate --help "
                  "lists its flags\n");
}

// check: over the target but on the card is "over the target ... it runs", not "does not fit"
// (LitGPT's Llama-2-13B LoRA row, 89.0% of an A100 40GB since its kept logits are replayed, at
// 1400 tokens instead of its 1304: 90.5%).
TEST_CASE("check: a config over the target that runs is not called one that does not fit") {
  std::ifstream in(std::string(MEMPLAN_TEST_DATA) + "/../../examples/published/litgpt-llama2-13b-lora-mb1.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const size_t at = yaml.find("seq_len: 1304");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 13, "seq_len: 1400");
  memplan::testing::TempDir dir;
  const std::string path = dir.path() + "/litgpt-13b-lora-1400.yaml";
  std::ofstream(path) << yaml;
  const Run r = invoke({"check", path});
  CHECK(r.code == 1);
  CHECK(contains(r.out, "over the target on a100-40gb: peak 35.83 GiB is 90.5% of 39.59 GiB (above_target; it runs), over the 90.0% "
                        "target by 205.4 MiB"));
  CHECK_FALSE(contains(r.out, "does not fit"));
}

// plan's cards carry the allocator cap: each --table card (and each catalog card plan tries) holds
// the cap plus its own context, a fraction taken of that card's memory.
TEST_CASE("plan --table under an allocator cap: every row is capped") {
  const Run r = invoke({"plan", "--model", "qwen2.5-0.5b", "--seq-len", "1024", "--global-batch", "8", "--gpu", "h200",
                        "--allocator-cap", "11GiB", "--table", "h100-80gb,h200,40GiB", "--json"});
  REQUIRE(r.code <= 1);
  const auto doc = nlohmann::json::parse(r.out);
  REQUIRE(doc["rows"].size() == 3);
  for (const auto& row : doc["rows"]) CHECK(row["capacity_bytes"] == (int64_t{11} << 30) + 785'252'352);
  const Run f = invoke({"plan", "--model", "qwen2.5-0.5b", "--seq-len", "1024", "--global-batch", "8", "--gpu", "h200",
                        "--allocator-cap", "0.25", "--table", "h100-80gb,h200", "--json"});
  const auto half = nlohmann::json::parse(f.out);
  CHECK(half["rows"][0]["capacity_bytes"] == static_cast<int64_t>(0.25 * 85'017'493'504.0) + 785'252'352);
  CHECK(half["rows"][1]["capacity_bytes"] == static_cast<int64_t>(0.25 * 150'109'880'320.0) + 785'252'352);
}

TEST_CASE("estimate shows the dtype the weights load in when from_pretrained's default decides it") {
  const std::string file = std::string(MEMPLAN_TEST_DATA) + "/formats/hf-trl/09-run-clm-bf16-qwen.json";
  const Run v4 = invoke({"estimate", "--config", file, "--gpu", "h100-80gb", "--transformers-version", "4.57"});
  REQUIRE(v4.code == 0);
  CHECK(v4.out.find("  weights: amp-bf16 (bf16 (autocast over fp32 weights: transformers 4.x from_pretrained loads fp32 without "
                    "dtype))\n") != std::string::npos);
  const Run v5 = invoke({"estimate", "--config", file, "--gpu", "h100-80gb", "--transformers-version", "5.0"});
  REQUIRE(v5.code == 0);
  CHECK(v5.out.find("  weights: bf16 (transformers 5.0: from_pretrained's dtype=\"auto\" loads the checkpoint's bfloat16") !=
        std::string::npos);
  const json j = parse_json(invoke({"estimate", "--config", file, "--gpu", "h100-80gb", "--transformers-version", "5.0", "--json"}));
  CHECK(j.at("setup").at("precision") == "bf16");
  CHECK(j.at("setup").at("sources").at("precision").get<std::string>().find("dtype=\"auto\"") != std::string::npos);
}

TEST_CASE("plan bounds its searches: --table at most 64 rows, --max-micro-batch at most 65536") {
  std::string sizes;
  for (int i = 1; i <= 65; ++i) sizes += (i > 1 ? "," : "") + std::to_string(i) + "GiB";
  const Run t = invoke({"plan", "--model", "gpt2", "--global-batch", "64", "--table", sizes});
  CHECK(t.code == 2);
  CHECK(line(t.err, 0) == "error: --table: 65 memory sizes or GPUs, over the 64 a table holds");
  const Run m = invoke({"plan", "--model", "gpt2", "--gpu", "a100-80gb", "--global-batch", "64", "--max-micro-batch", "100000000"});
  CHECK(m.code == 2);
  CHECK(line(m.err, 0) == "error: --max-micro-batch: must be at most 65536 (got 100000000)");
  CHECK(invoke({"plan", "--model", "gpt2", "--gpu", "a100-80gb", "--global-batch", "64", "--max-micro-batch", "65536"}).code == 0);
}

TEST_CASE("plan --emit FORMAT over a config in that format keeps the user's file: only what the plan changes, re-estimating within 0.5%") {
  memplan::testing::EnvGuard env;  // the fixtures' Hub ids resolve through the test cache, offline
  const std::string formats = std::string(MEMPLAN_TEST_DATA) + "/formats/";
  env.set("HF_HUB_CACHE", formats + "hf_cache");
  env.set("HF_HUB_OFFLINE", "1");
  env.unset("HUGGINGFACE_HUB_CACHE");
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-keeps-the-file";
  fs::remove_all(dir);
  fs::create_directories(dir);
  struct Row {
    std::string config, format;
    std::vector<std::string> flags;
    std::vector<std::string> kept;  // lines of the user's file the plan does not touch
    std::string changed;            // one change the plan makes, as the report lists it
  };
  const std::vector<Row> rows = {
      // The issue's cases: torchtune's learning rate, Axolotl's special tokens, packing, learning rate
      // and Hub id, TRL's QLoRA load dtype.
      {formats + "torchtune/llama3_2_1B_lora_single_device.yaml", "torchtune", {"--gpu-memory", "6GiB", "--seq-len", "2048"},
       {"  lr: 3e-4", "  weight_decay: 0.01", "output_dir: /tmp/torchtune/llama3_2_1B/lora_single_device # /tmp may be deleted",
        "  checkpoint_dir: /tmp/Llama-3.2-1B-Instruct/", "  packed: False  # True increases speed", "  profile_memory: False"},
       "batch_size: 4 -> 1"},
      {formats + "axolotl/01-llama-3.2-1b-qlora.yml", "axolotl", {"--gpu-memory", "6GiB"},
       {"base_model: NousResearch/Llama-3.2-1B", "sample_packing: true", "learning_rate: 0.0002", "special_tokens:"},
       "micro_batch_size: 2 -> 4"},  // with Liger's kernels (plan searches them where the Trainer applies them)
      {formats + "hf-trl/01-zephyr-7b-sft-qlora.yaml", "hf", {"--gpu", "rtx-4090"},
       {"torch_dtype: bfloat16", "model_name_or_path: mistralai/Mistral-7B-v0.1", "learning_rate: 2.0e-04", "lora_target_modules:"},
       "per_device_train_batch_size: 4 -> 8"},
      {formats + "hf-trl/09-run-clm-bf16-qwen.json", "hf", {"--gpu", "rtx-3060"},
       {"\"dataset_name\": \"wikitext\"", "\"block_size\": 1024"}, "+ use_liger_kernel: true"},
      {formats + "llamafactory/qwen3_full_sft.yaml", "llamafactory", {"--model", "qwen3-4b", "--gpu", "a100-80gb", "--gpus", "2"},
       {"model_name_or_path: Qwen/Qwen3-4B-Instruct-2507", "learning_rate: 1.0e-5", "cutoff_len: 2048"},
       "per_device_train_batch_size: 1 -> 2"},
      {formats + "litgpt/llama-3.2-1B_lora.yaml", "litgpt", {"--gpu", "rtx-3060"},
       {"checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B", "    lr: 0.0002", "  lr_warmup_steps: 10"}, "train.micro_batch_size: 1 -> 4"},
      {formats + "lightning/hf_module_deepspeed.yaml", "lightning", {"--model", "llama-3.2-1b", "--gpu", "a100-80gb", "--gpus", "4", "--global-batch", "16"},
       {"    model_name_or_path: meta-llama/Llama-3.2-1B", "      reduce_bucket_size: 500000000"},
       "trainer.strategy.init_args.stage: 3 -> 1"},
      {formats + "deepspeed/megatron-ds_zero2_config.json", "deepspeed", {"--model", "llama-3.1-8b", "--gpu", "a100-40gb", "--gpus", "8"},
       {"\"steps_per_print\": 1", "\"lr\": 0.00015"}, "- fp16"},
      {formats + "accelerate/02-alignment-handbook-zero3.yaml", "accelerate",
       {"--model", "llama-3.1-8b", "--gpu", "a100-40gb", "--gpus", "8", "--global-batch", "64", "--seq-len", "2048"},
       {"  zero3_init_flag: true", "main_training_function: main"}, "+ deepspeed_config.gradient_accumulation_steps: 4"},
      {kExamples + "/quickstart.yaml", "memplan", {"--gpu", "rtx-3060"}, {"  preset: qwen2.5-0.5b"}, "training.micro_batch_size: 1 -> 16"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.config);
    const std::string out = (dir / (row.format + (row.config.back() == 'n' ? ".json" : ".yaml"))).string();
    std::vector<std::string> args = {"plan", "--config", row.config, "--emit", row.format, "--out", out, "--force"};
    args.insert(args.end(), row.flags.begin(), row.flags.end());
    const Run text = invoke(args);
    REQUIRE(text.code == 0);
    CHECK(contains(text.out, "  kept " + row.config + " and changed "));
    CHECK(contains(text.out, "\n    " + row.changed + "\n"));
    const std::string written = slurp_file(out);
    for (const std::string& l : row.kept) {
      CAPTURE(l);
      CHECK(contains(slurp_file(row.config), l));
      CHECK(contains(written, l));
    }
    // The user's lines the plan leaves alone are all there, in order, comments included: only the
    // lines of keys the report names differ (checked on the YAML files that lose no block).
    args.push_back("--json");
    const Run p = invoke(args);
    REQUIRE(p.code == 0);
    const json doc = parse_json(p);
    const json changes = doc.at("emitted").at("kept").at("changes");
    bool removes = false;
    for (const auto& c : changes) removes = removes || c.get<std::string>().rfind("- ", 0) == 0;
    if (!removes && row.config.back() != 'n') {
      std::istringstream original(slurp_file(row.config));
      size_t from = 0, missing = 0;
      for (std::string l; std::getline(original, l);) {
        const size_t at = written.find(l + "\n", from);
        if (at == std::string::npos) ++missing;
        else from = at + l.size();
      }
      CHECK(missing <= changes.size());
    }
    // The re-check the report states gives the plan's peak within 0.5%.
    const double peak = recheck_json(text.out).at("per_gpu").at("peak_bytes").get<double>();
    const double planned = doc.at("best").at("peak_bytes").get<double>();
    CHECK(std::abs(peak - planned) <= 0.005 * planned);
    // --fresh writes memplan's own file.
    args.pop_back();
    args.push_back("--fresh");
    const Run f = invoke(args);
    REQUIRE(f.code == 0);
    CHECK_FALSE(contains(f.out, "  kept "));
    CHECK_FALSE(contains(slurp_file(out), "as it was, with"));
  }
  fs::remove_all(dir);
}

// Issue 26: advice that searches Liger too. plan turns Liger's kernels on where the HF Trainer
// applies them (planner::liger_applies) and they buy a faster fitting plan; every format that can
// hold them writes them, and what it wrote re-estimates to the plan's peak with Liger on.
TEST_CASE("plan searches Liger's kernels where the Trainer applies them; each format writes them and reads back") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-liger";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> base = {"plan", "--model", "qwen2.5-0.5b", "--gpu", "rtx-3060", "--global-batch", "32", "--seq-len", "2048"};
  for (const char* format : {"memplan", "train-config", "deepspeed", "hf", "trl", "axolotl", "accelerate", "llamafactory"}) {
    CAPTURE(format);
    const std::string out = (dir / (std::string(format) + (std::string(format) == "deepspeed" ? ".json" : ".yaml"))).string();
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--emit", format, "--out", out, "--force"});
    const Run text = invoke(args);
    REQUIRE(text.code == 0);
    CHECK(contains(text.out, ", Liger kernels, "));
    args.push_back("--json");
    const Run p = invoke(args);
    REQUIRE(p.code == 0);
    const json doc = parse_json(p);
    CHECK(doc.at("best").at("liger") == true);
    const json est = recheck_json(text.out);
    CHECK(est.at("setup").at("runtime").at("liger") == true);
    CHECK(est.at("setup").at("runtime").at("loss") == "fused-linear");
    const double planned = doc.at("best").at("peak_bytes").get<double>();
    CHECK(std::abs(est.at("per_gpu").at("peak_bytes").get<double>() - planned) <= 0.005 * planned);
  }
  // The same plan without Liger (--no-liger fixes the kernels as given) is slower: Liger won on speed.
  std::vector<std::string> off = base;
  off.insert(off.end(), {"--no-liger", "--json"});
  const Run r = invoke(off);
  REQUIRE(r.code == 0);
  const json without = parse_json(r);
  CHECK(without.at("best").at("liger") == false);
  bool said = false;
  for (const auto& l : without.at("left_out")) said = said || (l.at("option") == "Liger kernels" && l.at("why") == "--no-liger");
  CHECK(said);
  std::vector<std::string> on = base;
  on.push_back("--json");
  const json with = parse_json(invoke(on));
  CHECK(with.at("best").at("modelled_tokens_per_s").get<double>() > 1.02 * without.at("best").at("modelled_tokens_per_s").get<double>());
  // --loss keeps its loss: Liger (whose fused loss would replace it) is not searched, and that is said.
  std::vector<std::string> loss = base;
  loss.insert(loss.end(), {"--loss", "chunked", "--json"});
  const json chunked = parse_json(invoke(loss));
  CHECK(chunked.at("best").at("liger") == false);
  bool kept_loss = false;
  for (const auto& l : chunked.at("left_out"))
    kept_loss = kept_loss || (l.at("option") == "Liger kernels" && l.at("why") == "--loss chunked (Liger's fused loss would replace it)");
  CHECK(kept_loss);
  // Runtimes that do not apply Liger never get it, and say why.
  for (const char* format : {"torchtune", "litgpt", "lightning"}) {
    CAPTURE(format);
    const Run t = invoke({"plan", "--model", "llama-3.2-1b", "--gpu", "rtx-3060", "--global-batch", "8", "--finetune", "lora", "--emit",
                          format, "--out", (dir / (std::string(format) + ".yaml")).string(), "--force", "--json"});
    REQUIRE(t.code == 0);
    const json d = parse_json(t);
    CHECK(d.at("best").at("liger") == false);
    bool why = false;
    for (const auto& l : d.at("left_out")) why = why || (l.at("option") == "Liger kernels" && contains(l.at("why").get<std::string>(), "HF Trainer"));
    CHECK(why);
  }
  fs::remove_all(dir);
}

TEST_CASE("a re-check line names a card given by its memory with the memory's unit") {
  const Run r = invoke({"plan", "--model", "llama-3.2-1b", "--finetune", "lora", "--gpu-memory", "6GiB", "--global-batch", "8", "--emit", "torchtune"});
  REQUIRE(r.code == 0);
  CHECK(contains(r.err, "re-check it: memplan estimate --config torchtune-config.yaml --gpu-memory 6GiB --gpus 1\n"));
  CHECK(contains(r.out, "memplan estimate --config this-file --gpu-memory 6GiB --gpus 1\n"));
}

// A kept file keeps its own allocator_cap (the flag replaced it for the plan), so the re-check line
// carries the cap and the node's RAM as given, like the card's memory.
TEST_CASE("a kept file's re-check line carries --allocator-cap and --host-memory as the plan was given them") {
  const fs::path dir = fs::temp_directory_path() / "memplan-kept-sizes";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string config = (dir / "f.yaml").string(), out = (dir / "kept.yaml").string();
  std::ofstream(config) << "model:\n  preset: qwen2.5-0.5b\nhardware:\n  gpu: rtx-3060-12gb\n  allocator_cap: 0.5\n"
                           "training:\n  micro_batch_size: 1\n  seq_len: 512\n  precision: amp-bf16\n";
  const std::vector<std::string> args = {"plan", "--config", config, "--gpu-memory", "24GiB", "--allocator-cap", "16GiB",
                                         "--host-memory", "64GiB", "--emit", "memplan", "--out", out, "--force"};
  const Run text = invoke(args);
  REQUIRE(text.code == 0);
  CHECK(contains(text.out, "  kept " + config + " and changed "));
  CHECK(contains(slurp_file(out), "  allocator_cap: 0.5\n"));  // the user's line, kept
  CHECK(contains(text.out, "re-check it: memplan estimate --config " + out + " --gpu-memory 24GiB --allocator-cap 16GiB --host-memory 64GiB\n"));
  const json est = recheck_json(text.out);
  CHECK(est.at("device").at("allocator_cap_bytes") == int64_t{16} << 30);
  CHECK(est.at("host").at("per_node").at("capacity_bytes") == int64_t{64} << 30);
  CHECK(est.at("verdict").at("fits") == true);
  fs::remove_all(dir);
}

// A plan under an allocator cap writes the card and the cap, never the capped size as a card: the
// file (or its re-check line, where the format holds no target) re-estimates to the plan's verdict.
TEST_CASE("plan --allocator-cap: every format writes the card and the cap, and re-checks to the plan's capacity") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-capped";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const struct {
    std::vector<std::string> target;
    int64_t cap_bytes;
  } targets[] = {{{"--gpu", "h200", "--allocator-cap", "11GiB"}, int64_t{11} << 30},
                 {{"--gpu-memory", "24GiB", "--allocator-cap", "0.5"}, int64_t{12} << 30},
                 // A cap alone (no card: none written), and a preset whose memory a flag replaced (both written).
                 {{"--allocator-cap", "11GiB"}, int64_t{11} << 30},
                 {{"--gpu", "rtx-3090", "--gpu-memory", "20GiB", "--allocator-cap", "0.5"}, int64_t{10} << 30}};
  for (const auto& t : targets)
    for (const std::string fmt_name : {"memplan", "train-config", "deepspeed", "hf", "axolotl", "torchtune", "litgpt", "lightning"}) {
      CAPTURE(fmt_name);
      CAPTURE(t.target.size());
      CAPTURE(t.target[1]);
      const std::string out = (dir / (fmt_name + (fmt_name == "deepspeed" ? ".json" : ".yaml"))).string();
      std::vector<std::string> args = {"plan", "--model", "llama-3.2-1b", "--global-batch", "8", "--seq-len", "1024", "--finetune", "lora",
                                       "--emit", fmt_name, "--out", out, "--force"};
      args.insert(args.end(), t.target.begin(), t.target.end());
      const Run text = invoke(args);
      REQUIRE(text.code == 0);
      args.push_back("--json");
      const json plan = parse_json(invoke(args));
      const json est = recheck_json(text.out);
      CHECK(est.at("device").at("allocator_cap_bytes") == t.cap_bytes);
      CHECK(est.at("device").at("capacity_bytes") == plan.at("request").at("capacity_bytes"));
      CHECK(est.at("verdict").at("fits") == true);
    }
  fs::remove_all(dir);
}

TEST_CASE("plan --device cpu: every format states the CPU (device: cpu or --device cpu) and re-checks to the plan's capacity") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-cpu";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::string> targets[] = {{"--device", "cpu"}, {"--device", "cpu", "--gpu-memory", "16GiB"}};
  for (const auto& t : targets)
    for (const std::string fmt_name : {"memplan", "train-config", "deepspeed", "hf", "axolotl", "torchtune", "litgpt", "lightning"}) {
      CAPTURE(fmt_name);
      CAPTURE(t.size());
      const std::string out = (dir / (fmt_name + (fmt_name == "deepspeed" ? ".json" : ".yaml"))).string();
      std::vector<std::string> args = {"plan", "--model", "qwen2.5-0.5b", "--global-batch", "8", "--seq-len", "256",
                                       "--emit", fmt_name, "--out", out, "--force"};
      args.insert(args.end(), t.begin(), t.end());
      const Run text = invoke(args);
      if (fmt_name == "deepspeed") {  // memplan models the CPU without DeepSpeed: nothing to write
        CHECK(text.code == 1);
        CHECK((text.out + text.err).find("--emit deepspeed cannot express any configuration that fits") != std::string::npos);
        continue;
      }
      REQUIRE(text.code == 0);
      CHECK(slurp_file(out).find("gpu: cpu") == std::string::npos);  // not a card
      args.push_back("--json");
      const json plan = parse_json(invoke(args));
      const json est = recheck_json(text.out);
      CHECK(est.at("setup").at("device_kind") == "cpu");
      CHECK(est.at("device").at("capacity_bytes") == plan.at("request").at("capacity_bytes"));
      CHECK(est.at("verdict").at("fits") == true);
      if (fmt_name != "memplan") continue;
      // The file's target wins over check's default card; --device cpu beside a file for the CPU
      // keeps the memory it states.
      const json checked = parse_json(invoke({"check", out, "--gpu", "rtx-3090", "--format", "json"}));
      CHECK(checked.at("results").at(0).at("device") == "cpu");
      CHECK(checked.at("results").at(0).at("capacity_bytes") == plan.at("request").at("capacity_bytes"));
      const json again = parse_json(invoke({"estimate", "--config", out, "--device", "cpu", "--json"}));
      CHECK(again.at("device").at("capacity_bytes") == plan.at("request").at("capacity_bytes"));
    }
  fs::remove_all(dir);
}

TEST_CASE("plan --calibration: every format's re-check names the profile and re-estimates to the plan's peak") {
  const fs::path dir = fs::temp_directory_path() / "memplan-plan-calibrated";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string profile = std::string(MEMPLAN_TEST_DATA) + "/profiles/calibration.yaml";  // made on an rtx-3090
  for (const std::string fmt_name : {"memplan", "train-config", "hf", "axolotl", "torchtune", "litgpt", "lightning"}) {
    CAPTURE(fmt_name);
    const std::string out = (dir / (fmt_name + ".yaml")).string();
    std::vector<std::string> args = {"plan", "--model", "qwen2.5-0.5b", "--global-batch", "8", "--seq-len", "256", "--gpu", "rtx-3090",
                                     "--calibration", profile, "--emit", fmt_name, "--out", out, "--force"};
    const Run text = invoke(args);
    REQUIRE(text.code == 0);
    CHECK(text.out.find("--calibration " + profile) != std::string::npos);
    args.push_back("--json");
    const json plan = parse_json(invoke(args));
    const json est = recheck_json(text.out);
    CHECK(est.at("per_gpu").at("peak_bytes") == plan.at("best").at("peak_bytes"));
  }
  fs::remove_all(dir);
}

TEST_CASE("plan --emit torchtune picks what torchtune can run: a recipe offloading activations keeps its checkpointing") {
  // The search may drop checkpointing and keep the recipe's activation offload, which torchtune cannot
  // run (it offloads the checkpointed inputs); the plan took it and the emitter refused it (exit 2).
  const fs::path out = fs::temp_directory_path() / "memplan-tt-offload.yaml";
  const std::string recipe = std::string(MEMPLAN_TEST_DATA) + "/formats/torchtune/llama3_1_8B_lora_memory_options.yaml";
  std::vector<std::string> args = {"plan", "--config", recipe, "--gpu-memory", "24GiB", "--emit", "torchtune", "--out", out.string(), "--force"};
  const Run text = invoke(args);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("--emit torchtune cannot express the overall best (torchtune cannot run activation offloading without "
                      "checkpointing") != std::string::npos);
  args.push_back("--json");
  const json plan = parse_json(invoke(args));
  CHECK(plan.at("best").at("checkpointing") == "full");
  const json est = recheck_json(text.out);
  CHECK(est.at("per_gpu").at("peak_bytes") == plan.at("best").at("peak_bytes"));
  CHECK(est.at("verdict").at("fits") == true);
  fs::remove(out);
}

TEST_CASE("plan --tensor-parallel --emit deepspeed writes AutoTP training, never with ZeRO-3, and reads back to the plan's peak") {
  const fs::path out = fs::temp_directory_path() / "memplan-autotp-plan.json";
  const std::vector<std::string> args = {"plan", "--model", "llama-3.1-8b", "--gpu", "a100-40gb", "--gpus", "8", "--tensor-parallel", "2",
                                         "--global-batch", "64", "--seq-len", "2048", "--emit", "deepspeed", "--out", out.string(),
                                         "--force", "--json"};
  const Run p = invoke(args);
  REQUIRE(p.code == 0);
  const json best = parse_json(p).at("best");
  CHECK(best.at("zero_stage") != 3);
  const json ds = json::parse(slurp_file(out.string()));
  CHECK(ds.at("tensor_parallel").at("autotp_size") == 2);
  const Run e = invoke({"estimate", "--config", out.string(), "--json"});
  REQUIRE(e.code == 0);
  CHECK(parse_json(e).at("per_gpu").at("peak_bytes") == best.at("peak_bytes"));
  CHECK(parse_json(e).at("setup").at("parallel").at("tensor_parallel") == 2);
  fs::remove(out);
}

// Ranks that hold different amounts (torch's ZeroRedundancyOptimizer's shares over 3 ranks, one
// of them 60,160 parameters short): estimate and fit say whose figures they show, --json every
// rank's phases (tests/ranks measures the same job per rank).
TEST_CASE("estimate and fit name the worst rank; --json lists every rank where they differ") {
  const std::string config = std::string(MEMPLAN_TEST_DATA) + "/../ranks/cases/zero-redundancy.yaml";
  const std::string says = "  ranks: the figures are rank 0's, the worst of 3 (ZeroRedundancyOptimizer's largest share: 897,024 of "
                           "2,630,912 trainable parameters); the least a rank needs is 46.0 MiB (--json lists each)\n";
  for (const char* cmd : {"estimate", "fit"}) {
    CAPTURE(cmd);
    const Run r = invoke({cmd, "--config", config, "--gpus", "3"});
    CHECK(r.code == 0);
    CHECK(r.out.find(says) != std::string::npos);
  }
  const auto doc = nlohmann::json::parse(invoke({"estimate", "--config", config, "--gpus", "3", "--json"}).out);
  const auto& ranks = doc["per_gpu"]["ranks"];
  REQUIRE(ranks.size() == 2);  // ranks 0 and 1 hold the same: one entry
  CHECK(ranks[0]["first_rank"] == 0);
  CHECK(ranks[0]["last_rank"] == 1);
  CHECK(ranks[1]["first_rank"] == 2);
  CHECK(ranks[1]["last_rank"] == 2);
  CHECK(doc["per_gpu"]["worst_rank"]["rank"] == 0);
  CHECK(ranks[0]["peak_bytes"] == doc["per_gpu"]["peak_bytes"]);
  CHECK(ranks[1]["peak_bytes"].get<int64_t>() < ranks[0]["peak_bytes"].get<int64_t>());
  // rank 2's share is 60,160 parameters short (836,864 of them): AdamW's two fp32 states, 8 B each
  CHECK(ranks[0]["phases"]["forward"].get<int64_t>() - ranks[1]["phases"]["forward"].get<int64_t>() == 60'160 * 8);
  // A million ranks (the most --gpus takes): the ranks past the tensors hold nothing, one entry.
  const Run big = invoke({"estimate", "--config", config, "--gpus", "1000000", "--json"});
  REQUIRE(big.code == 0);
  CHECK(big.out.size() < 200'000);
  const auto many = nlohmann::json::parse(big.out)["per_gpu"]["ranks"];
  CHECK(many.back()["last_rank"] == 999'999);
  // Plain DDP: every rank holds the same, nothing listed.
  const std::string ddp = std::string(MEMPLAN_TEST_DATA) + "/../ranks/cases/ddp.yaml";
  CHECK_FALSE(nlohmann::json::parse(invoke({"estimate", "--config", ddp, "--json"}).out)["per_gpu"].contains("ranks"));
  CHECK(invoke({"estimate", "--config", ddp}).out.find("  ranks: ") == std::string::npos);
}

TEST_CASE("plan's re-check line is one a shell reads back word for word: a hostile _name_or_path runs nothing") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("memplan-recheck-quoting-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  json cfg = json::parse(slurp_file(std::string(MEMPLAN_TEST_DATA) + "/../ranks/tiny-llama/config.json"));
  const std::string name = "x'; touch " + (dir / "PWNED").string() + " #$(id)";
  cfg["_name_or_path"] = name;
  std::ofstream(dir / "config.json") << cfg.dump();
  const std::string out = (dir / "job dir; x").string();
  fs::create_directories(out);
  const Run r = invoke({"plan", "--model", (dir / "config.json").string(), "--gpu", "rtx-4090", "--global-batch", "8", "--seq-len", "128",
                        "--emit", "accelerate", "--out", out + "/acc'.yaml"});
  REQUIRE(r.code <= 1);
  const size_t at = r.out.find("re-check it: memplan ");
  REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at + 21, r.out.find('\n', at) - at - 21);
  // bash splits it as a pasted line: each word NUL-terminated.
  const fs::path script = dir / "split.sh";
  std::ofstream(script) << "for a in " << line << "; do printf '%s\\0' \"$a\"; done\n";
  std::string words;
  if (FILE* p = ::popen(fmt::format("bash '{}'", script.string()).c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) words.append(buf, n);
    ::pclose(p);
  }
  std::vector<std::string> args;
  for (size_t s = 0, e; (e = words.find('\0', s)) != std::string::npos; s = e + 1) args.push_back(words.substr(s, e - s));
  CHECK_FALSE(fs::exists(dir / "PWNED"));
  REQUIRE(args.size() > 4);
  CHECK(args[0] == "estimate");
  CHECK(args[2] == out + "/acc'.yaml");
  CHECK(std::find(args.begin(), args.end(), name) != args.end());  // --model's value, whole
  fs::remove_all(dir);
}

TEST_CASE("--out --force never replaces a file the config itself names (its deepspeed: JSON), by any name") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("memplan-out-references-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ds = "{\"zero_optimization\": {\"stage\": 2}, \"train_micro_batch_size_per_gpu\": 1}\n";
  std::ofstream(dir / "ds.json") << ds;
  std::ofstream(dir / "train.yaml") << "model_name_or_path: gpt2\nper_device_train_batch_size: 1\ndeepspeed: ds.json\n";
  fs::create_hard_link(dir / "ds.json", dir / "same.json");
  for (const char* out : {"ds.json", "same.json"}) {
    CAPTURE(out);
    const Run r = invoke({"plan", "--config", (dir / "train.yaml").string(), "--gpu", "rtx-4090", "--global-batch", "8", "--emit", "deepspeed",
                          "--out", (dir / out).string(), "--force"});
    CHECK(r.code == 2);
    CHECK(contains(r.err, "memplan read it for this command"));
    CHECK(slurp_file((dir / "ds.json").string()) == ds);
  }
  // Another path is written.
  const Run ok = invoke({"plan", "--config", (dir / "train.yaml").string(), "--gpu", "rtx-4090", "--global-batch", "8", "--emit", "deepspeed",
                         "--out", (dir / "new.json").string()});
  CHECK(ok.code <= 1);
  CHECK(fs::exists(dir / "new.json"));
  fs::remove_all(dir);
}
