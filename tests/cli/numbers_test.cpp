// Numbers out of any physical range (issue 12): each is refused with exit 2, a message naming the
// value and a hint; never a wrapped sum, a crash, or "fits". Each case failed before the range
// checks in validate() and the checked arithmetic (estimator/checked.h).
#include <doctest/doctest.h>

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

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

struct Dir {
  fs::path path;
  Dir() {
    std::string t = (fs::temp_directory_path() / "memplan-numbers-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~Dir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

std::string model_file(const std::string& name) { return std::string(MEMPLAN_TEST_DATA) + "/../../profiles/models/" + name; }
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// The bundled config.json with `key` replaced (or added at the top) as `value`.
std::string edited(const std::string& name, const std::string& key, const std::string& value) {
  std::string t = slurp(model_file(name));
  const std::string k = "\"" + key + "\":";
  const size_t at = t.find(k);
  if (at == std::string::npos) return "{\"" + key + "\": " + value + "," + t.substr(t.find('{') + 1);
  const size_t end = t.find_first_of(",\n}", at + k.size());
  return t.substr(0, at + k.size()) + " " + value + t.substr(end);
}
std::string without(const std::string& name, const std::string& key) {
  std::string t = slurp(model_file(name));
  const size_t at = t.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  const size_t end = t.find('\n', at);
  return t.substr(0, at) + t.substr(end + 1);
}

// Refused: exit 2, nothing on stdout, the message and a hint on stderr.
void refused(const Run& r, const std::string& message) {
  CAPTURE(r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find(message) != std::string::npos);
  CHECK(r.err.find("\nhint: ") != std::string::npos);
}

}  // namespace

TEST_CASE("parallel degrees are bounded before they are multiplied (2^32 x 2^32 wrapped to 0: SIGFPE)") {
  refused(invoke({"estimate", "--model", "llama-3.2-1b", "--tensor-parallel", "4294967296", "--pipeline-parallel",
                  "4294967296", "--gpus", "8"}),
          "error: --tensor-parallel: is absurdly large (4294967296); the limit is 1000000");
}

TEST_CASE("a sequence of 94 million tokens is a clear 'does not fit', never a wrapped 'fits'") {
  // bf16: a fused SDPA kernel, memory linear in s. (In fp32 the grouped-query model runs SDPA's
  // math kernel, whose s x s probabilities at this length are past 64-bit: refused, below.)
  const Run r = invoke({"estimate", "--model", "llama-3.2-1b", "--seq-len", "94000000", "--gpu", "h100-80gb", "--precision",
                        "bf16", "--json"});
  CAPTURE(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("\"fits\": false") != std::string::npos);
  CHECK(r.out.find("\"peak_bytes\": -") == std::string::npos);
  CHECK(r.out.find("\"bytes\": -") == std::string::npos);
  refused(invoke({"estimate", "--model", "llama-3.2-1b", "--seq-len", "94000000", "--gpu", "h100-80gb", "--json"}),
          "too large to count in 64-bit integers");
  refused(invoke({"estimate", "--model", "llama-3.2-1b", "--seq-len", "100000001"}), "--seq-len");
}

TEST_CASE("HF config numbers out of range are errors at their line") {
  Dir d;
  // GPT-2's causal-mask buffer (n_positions^2 bytes per layer) at n_positions = 3e9: 1e20 bytes.
  refused(invoke({"estimate", "--model", d.write("gpt2_pos.json", edited("gpt2.json", "n_positions", "3037000500"))}),
          "model.max_position_embeddings: must be between 0 and 100000000 (got 3037000500)");
  // Within the bound, 90 million positions x 1,000 layers of masks: 8.1e18 bytes.
  std::string deep = edited("gpt2.json", "n_positions", "90000000");
  deep.replace(deep.find("\"n_layer\": 12"), std::strlen("\"n_layer\": 12"), "\"n_layer\": 1000");
  refused(invoke({"estimate", "--model", d.write("gpt2_pos2.json", deep), "--gpu", "h100-80gb"}),
          "model.max_position_embeddings: is too large to estimate: the causal-mask buffers");
  refused(invoke({"estimate", "--model", d.write("gpt2_neg.json", edited("gpt2.json", "n_positions", "-5"))}),
          "model.max_position_embeddings: must be between 0 and 100000000 (got -5)");
  refused(invoke({"estimate", "--model", d.write("gpt2_labels.json", edited("gpt2.json", "num_labels", "-7"))}),
          "model.num_labels: must be between 0 and 100000000 (got -7)");
  refused(invoke({"estimate", "--model", d.write("moe.json", edited("qwen1.5-moe-a2.7b.json", "moe_intermediate_size", "-1408"))}),
          "model.moe_intermediate_size: must be between 0 and 10000000 (got -1408)");
  refused(invoke({"estimate", "--model",
                  d.write("shared.json", edited("qwen1.5-moe-a2.7b.json", "shared_expert_intermediate_size", "-5632"))}),
          "model.shared_expert_intermediate_size: must be between 0 and 10000000 (got -5632)");
}

TEST_CASE("qwen2_moe with a dense layer and no intermediate_size (divided by zero)") {
  Dir d;
  std::string no_width = without("qwen1.5-moe-a2.7b.json", "intermediate_size");
  const size_t at = no_width.find("\"decoder_sparse_step\": 1");
  REQUIRE(at != std::string::npos);
  no_width[at + std::strlen("\"decoder_sparse_step\": ")] = '2';
  const std::string path = d.write("dense.json", no_width);
  refused(invoke({"estimate", "--model", path}), "model.intermediate_size: must be at least 1: the model has dense layers");
}

TEST_CASE("DeepSpeed and data-loading numbers: negative buckets, prefetch_factor refused at their line") {
  Dir d;
  const std::string ds = d.write(
      "ds.json", "{\"train_micro_batch_size_per_gpu\": 1,\n \"zero_optimization\": {\"stage\": 2,\n  \"reduce_bucket_size\": -500000000}}");
  refused(invoke({"estimate", "--config", ds, "--model", "llama-3.2-1b", "--gpus", "2"}),
          "ds.json:3:3: error: parallel.reduce_bucket_elems: must be between 0 and 1000000000000 (got -500000000)");
  const std::string ds3 = d.write(
      "ds3.json", "{\"train_micro_batch_size_per_gpu\": 1,\n \"zero_optimization\": {\"stage\": 3,\n  \"stage3_prefetch_bucket_size\": -5}}");
  refused(invoke({"estimate", "--config", ds3, "--model", "llama-3.2-1b", "--gpus", "2"}),
          "ds3.json:3:3: error: parallel.stage3_prefetch_bucket_elems: must be between 0");
  const std::string y = d.write("prefetch.yaml", "model: llama-3.2-1b\ndata:\n  prefetch_factor: -4\n  num_workers: 2\n");
  refused(invoke({"estimate", "--config", y}), "prefetch.yaml:3:3: error: data.prefetch_factor: must be between 0 and 10000 (got -4)");
}

TEST_CASE("a calibration's constants are bounded, and the overhead constant is never negative") {
  // Reserved minus allocated is never negative: neither is the constant calibrate fits for it.
  Dir d;
  std::string cal = slurp(std::string(MEMPLAN_TEST_DATA) + "/profiles/calibration.yaml");
  const size_t at = cal.find("overhead_bytes: ");
  REQUIRE(at != std::string::npos);
  const std::string huge = cal.substr(0, at) + "overhead_bytes: -9000000000000000000" + cal.substr(cal.find('\n', at));
  refused(invoke({"estimate", "--model", "gpt2", "--calibration", d.write("huge.yaml", huge)}),
          "corrections.overhead_bytes must be a byte count from 0 to 1 TiB");
  const std::string neg = cal.substr(0, at) + "overhead_bytes: -1099511627776" + cal.substr(cal.find('\n', at));
  refused(invoke({"estimate", "--model", "gpt2", "--gpu", "rtx-4090", "--calibration", d.write("neg.yaml", neg), "--json"}),
          "neg.yaml:15:3: error: corrections.overhead_bytes must be a byte count from 0 to 1 TiB (got '-1099511627776')");
}

TEST_CASE("plan --global-batch 9223372036854775807 is out of range, not a negative batch") {
  refused(invoke({"plan", "--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--global-batch", "9223372036854775807"}),
          "error: --global-batch: global batch 9223372036854775807 is out of range");
}

TEST_CASE("--lora-alpha nan and inf are refused") {
  refused(invoke({"estimate", "--model", "llama-3.2-1b", "--finetune", "lora", "--lora-alpha", "nan"}), "--lora-alpha");
  refused(invoke({"estimate", "--model", "llama-3.2-1b", "--finetune", "lora", "--lora-alpha", "inf"}), "--lora-alpha");
  refused(invoke({"estimate", "--model", "llama-3.2-1b", "--finetune", "lora", "--lora-alpha", "-16"}), "--lora-alpha");
}
