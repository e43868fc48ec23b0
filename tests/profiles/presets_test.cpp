// Bundled presets: every model config loads and gives the parameter count that
// profiles/models/README.md pins; names, aliases and did-you-mean for models and GPUs.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <regex>

#include "estimator/model.h"
#include "profiles/profiles.h"
#include "tests/estimator/specs.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

struct ReadmeRow {
  std::string preset;
  std::string repo;
  int64_t total = 0;
  int64_t active = 0;  // 0 when the README gives no active count (dense models)
};

int64_t digits_of(const std::string& with_commas) {
  std::string d;
  for (char c : with_commas)
    if (c != ',') d += c;
  return std::stoll(d);
}

// The preset table of profiles/models/README.md: | preset | repo | type | published | config count | ...
std::vector<ReadmeRow> readme_rows() {
  std::ifstream in(data_dir() + "/models/README.md");
  REQUIRE(in);
  const std::regex row(R"(^\| ([a-z0-9.\-]+) \| (\S+)[^|]*\| \w+ \|[^|]*\| ([0-9,]+)( total / ([0-9,]+) active)?)");
  std::vector<ReadmeRow> rows;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row) || m[1] == "preset") continue;
    rows.push_back({m[1], m[2], digits_of(m[3]), m[5].matched ? digits_of(m[5]) : 0});
  }
  return rows;
}

}  // namespace

TEST_CASE("every model preset loads and matches the config count in profiles/models/README.md") {
  const auto rows = readme_rows();
  const auto presets = model_presets();
  REQUIRE(rows.size() == 51);
  REQUIRE(presets.size() == rows.size());
  for (const auto& r : rows) {
    CAPTURE(r.preset);
    const ModelSpec m = load_model(r.preset, Where{});
    CHECK(m.name == r.preset);
    CHECK(m.hf_repo == r.repo);
    // The repository id read off the file's text for the alias index is the parsed one.
    REQUIRE(find_model_preset(r.repo).has_value());
    CHECK(find_model_preset(r.repo)->name == r.preset);
    CHECK(find_model_preset(r.preset)->hf_repo == r.repo);
    CHECK(count_model_parameters(m) == r.total);
    if (r.active > 0) {
      // The README's "active" follows the model cards (Mixtral's 12.9B) and counts the input
      // embedding table; active_per_token leaves the lookup out (a token touches one row of it).
      TrainingSetup s;
      s.model = m;
      REQUIRE_FALSE(m.tie_word_embeddings);
      CHECK(count_parameters(s).active_per_token + m.vocab_size * m.hidden_size == r.active);
    }
  }
}

TEST_CASE("STYLE.md golden counts come out of the bundled configs") {
  // GPT-2 124,439,808; Llama-2-7B 6,738,415,616; Mixtral-8x7B 46,702,792,704 (HF num_parameters()).
  CHECK(count_model_parameters(load_model("gpt2", Where{})) == 124'439'808);
  CHECK(count_model_parameters(load_model("llama-2-7b", Where{})) == 6'738'415'616);
  CHECK(count_model_parameters(load_model("mixtral-8x7b", Where{})) == 46'702'792'704);
}

namespace {
void check_same_spec(const ModelSpec& got, const ModelSpec& want) {
  CAPTURE(want.name);
  CHECK(got.model_type == want.model_type);
  CHECK(got.hidden_size == want.hidden_size);
  CHECK(got.num_layers == want.num_layers);
  CHECK(got.num_attention_heads == want.num_attention_heads);
  CHECK(got.num_key_value_heads == want.num_key_value_heads);
  CHECK(got.head_dim == want.head_dim);
  CHECK(got.intermediate_size == want.intermediate_size);
  CHECK(got.vocab_size == want.vocab_size);
  CHECK(got.norm == want.norm);
  CHECK(got.activation == want.activation);
  CHECK(got.gated_mlp == want.gated_mlp);
  CHECK(got.positions == want.positions);
  CHECK(got.tie_word_embeddings == want.tie_word_embeddings);
  CHECK(got.qkv_bias == want.qkv_bias);
  CHECK(got.o_bias == want.o_bias);
  CHECK(got.mlp_bias == want.mlp_bias);
  CHECK(got.norm_bias == want.norm_bias);
  CHECK(got.attention_dropout == want.attention_dropout);
  CHECK(got.hidden_dropout == want.hidden_dropout);
  CHECK(got.embedding_dropout == want.embedding_dropout);
  CHECK(got.num_experts == want.num_experts);
  CHECK(got.experts_per_token == want.experts_per_token);
  CHECK(got.head == want.head);
}
}  // namespace

TEST_CASE("bundled configs produce the estimator tests' hand-written specs") {
  check_same_spec(load_model("gpt2", Where{}), testing::gpt2());
  check_same_spec(load_model("llama-2-7b", Where{}), testing::llama2_7b());
  check_same_spec(load_model("mixtral-8x7b", Where{}), testing::mixtral());
}

TEST_CASE("family details the counts alone would not catch") {
  const ModelSpec gemma = load_model("gemma-7b", Where{});
  CHECK(gemma.activation == Activation::gelu_tanh);  // hidden_act says gelu; transformers runs tanh GeGLU
  CHECK(gemma.head_dim == 256);
  CHECK(gemma.tie_word_embeddings);
  const ModelSpec qwen = load_model("qwen2.5-7b", Where{});
  CHECK(qwen.qkv_bias);
  CHECK_FALSE(qwen.o_bias);
  const ModelSpec qmoe = load_model("qwen1.5-moe-a2.7b", Where{});
  CHECK(qmoe.num_experts == 60);
  CHECK(qmoe.moe_intermediate_size == 1408);
  CHECK(qmoe.shared_expert_intermediate_size == 5632);
  CHECK(qmoe.shared_expert_gate);
  CHECK_FALSE(qmoe.norm_topk_prob);
  CHECK(load_model("qwen3-30b-a3b", Where{}).norm_topk_prob);
  const ModelSpec nano = load_model("moe-nano", Where{});
  CHECK(nano.capacity_factor == 1.25);
  CHECK(nano.moe_intermediate_size == 1408);
  const ModelSpec bert = load_model("bert-base-uncased", Where{});
  CHECK(bert.head == HeadKind::masked_lm);
  CHECK(bert.bert_style);
  CHECK_FALSE(bert.final_norm);
  CHECK(bert.type_vocab_size == 2);
  CHECK(load_model("pythia-160m", Where{}).positions == PositionKind::rotary);
}

TEST_CASE("models resolve by preset, HF repository id, config.json path and directory") {
  const std::string dir = std::string(MEMPLAN_TEST_DATA) + "/profiles/models";
  CHECK(load_model("meta-llama/Llama-2-7b-hf", Where{}).name == "llama-2-7b");
  CHECK(load_model("META-LLAMA/llama-2-7B-HF", Where{}).name == "llama-2-7b");
  CHECK(load_model("Mixtral-8x7B", Where{}).name == "mixtral-8x7b");
  const ModelSpec by_file = load_model(dir + "/tiny-classifier.json", Where{});
  CHECK(by_file.name == "tiny-classifier");
  CHECK(by_file.head == HeadKind::sequence_classification);
  CHECK(by_file.num_labels == 3);  // len(id2label), not the stale num_labels key
  const ModelSpec by_dir = load_model(dir + "/tiny-llama", Where{});
  CHECK(by_dir.name == "tiny-llama");
  CHECK(by_dir.num_layers == 2);
}

TEST_CASE("unknown models name the nearest preset") {
  Where w;
  w.flag = "--model";
  auto message = [&](const std::string& name) {
    try {
      load_model(name, w);
    } catch (const InputError& e) {
      return e.render();
    }
    return std::string("no error");
  };
  CHECK(message("llama-7b") ==
        "error: --model: unknown model 'llama-7b'\nhint: did you mean 'llama-2-7b'? (memplan models lists the presets)");
  CHECK(message("mistral") ==
        "error: --model: unknown model 'mistral'\nhint: did you mean 'mistral-7b'? (memplan models lists the presets)");
  CHECK(message("zzzzzzzzzz") ==
        "error: --model: unknown model 'zzzzzzzzzz'\nhint: memplan models lists the presets; --model also takes a "
        "config.json or a model directory");
  CHECK(message("missing/config.json") ==
        "error: --model: cannot find 'missing/config.json'\nhint: --model takes a preset name, a config.json or a "
        "directory holding one");
}

TEST_CASE("GPU presets resolve by name and alias, spaces and underscores normalised") {
  const GpuCatalog& c = gpu_catalog();
  REQUIRE(c.find("rtx-3090") != nullptr);
  CHECK(c.find("RTX 3090")->name == "rtx-3090");
  CHECK(c.find("NVIDIA GeForce RTX 3090")->name == "rtx-3090");
  CHECK(c.find("nvidia geforce rtx 4090")->name == "rtx-4090");
  CHECK(c.find("h100_80gb")->name == "h100-80gb");
  // A bare model name fits several cards: no alias picks one (issue 26); the --gpu error lists them.
  CHECK(c.find("A100") == nullptr);
  CHECK(c.find("h100") == nullptr);
  CHECK(c.find("v100") == nullptr);
  CHECK(c.find("rtx3090ti")->name == "rtx-3090-ti");
  CHECK(c.find("rtx-3090ti") == nullptr);
  for (const char* required : {"rtx-3060-12gb", "rtx-3090", "rtx-4090", "a10g", "l4", "l40s", "v100-16gb", "v100-32gb",
                               "a100-40gb", "a100-80gb", "h100-80gb", "h200", "mi250x", "mi300x", "rx-6750-xt", "m2-16gb"}) {
    CAPTURE(required);
    CHECK(c.find(required) != nullptr);
  }
}

TEST_CASE("the GPU index read off gpus.yaml's lines agrees with every parsed entry") {
  const GpuCatalog& c = gpu_catalog();
  REQUIRE(c.size() >= 38);
  REQUIRE(c.all().size() == c.size());
  for (const GpuProfile* g : c.all()) {
    CAPTURE(g->name);
    CHECK(c.find(g->name) == g);
    for (const auto& a : g->aliases) CHECK(c.find(a) == g);
  }
}

TEST_CASE("a GPU catalog parses only the entries asked for, and a broken one fails when asked") {
  const std::string head =
      "schema: memplan.gpus/v1\nfamilies:\n  - name: ampere\n    cuda_context_bytes: 1\n    cublas_workspace_bytes: 2\n"
      "gpus:\n  # comment\n";
  const std::string good = "  - name: card-a\n    aliases: [\"Card A\", card_a2]\n    vendor: nvidia\n    family: ampere\n"
                           "    memory_bytes: 1000\n";
  const std::string bad = "  - name: card-b\n    vendor: nvidia\n    family: nosuch\n    memory_bytes: 1000\n";
  const GpuCatalog c = parse_gpu_catalog(head + good + bad, "cat.yaml");
  CHECK(c.size() == 2);
  REQUIRE(c.find("card a") != nullptr);  // the broken entry is never parsed
  CHECK(c.find("CARD-A2")->name == "card-a");
  CHECK(c.suggest("card-c").size() == 2);
  std::string msg;
  try {
    c.find("card-b");
  } catch (const InputError& e) {
    msg = e.render();
  }
  CHECK(msg == "cat.yaml:15:5: error: GPU 'card-b' names unknown family 'nosuch'\nhint: families: lists the known families");
  try {
    parse_gpu_catalog(head + good + good, "cat.yaml");
    FAIL("a duplicate entry must be refused");
  } catch (const InputError& e) {
    CHECK(e.render() == "cat.yaml:13:3: error: GPU 'card-a' is listed twice\nhint: the first is at line 8");
  }
  // An alias equal to another GPU's name (or alias) would shadow it (issue 24): refused.
  const std::string shadow = "  - name: card-c\n    aliases: [card-a]\n    vendor: nvidia\n    family: ampere\n"
                             "    memory_bytes: 24\n";
  try {
    parse_gpu_catalog(head + good + shadow, "cat.yaml");
    FAIL("an alias naming another entry must be refused");
  } catch (const InputError& e) {
    CHECK(e.render() == "cat.yaml:13:3: error: GPU 'card-c': 'card-a' also names GPU 'card-a' (line 8)\nhint: each name and "
                        "alias may name one entry: drop or rename the alias");
  }
  const std::string shadow_alias = "  - name: card-d\n    aliases: [card_a2]\n    vendor: nvidia\n    family: ampere\n"
                                   "    memory_bytes: 24\n";
  CHECK_THROWS_AS(parse_gpu_catalog(head + good + shadow_alias, "cat.yaml"), InputError);
}

// Issue 26: the GPU table mixed nominal and measured capacities without saying which.
TEST_CASE("every bundled GPU says where its memory comes from; nominal ones are whole GiB, measured ones cite the recording") {
  const GpuCatalog& c = gpu_catalog();
  int measured = 0, nominal = 0;
  for (const GpuProfile* g : c.all()) {
    CAPTURE(g->name);
    const std::string& b = g->memory_basis;
    CHECK((b == "measured" || b == "printed" || b == "printed-mib" || b == "nominal"));
    if (b == "nominal") {
      ++nominal;
      CHECK(g->memory_bytes % (int64_t{1} << 30) == 0);
      CHECK(g->source.find("nominal") != std::string::npos);
    }
    if (b == "printed-mib") CHECK(g->memory_bytes % (int64_t{1} << 20) == 0);
    if (b == "printed") CHECK(g->source.find(std::to_string(g->memory_bytes) + " bytes") != std::string::npos);
    if (b == "measured") {
      ++measured;
      CHECK(g->source.find("tests/data/gpu") != std::string::npos);
    }
  }
  CHECK(measured == 2);  // the H100 and H200 memplan's harness ran on
  CHECK(nominal > 0);
  const std::string cat = "schema: memplan.gpus/v1\nfamilies:\n  - name: ampere\n    cuda_context_bytes: 1\n    cublas_workspace_bytes: 2\n"
                          "gpus:\n  - name: card-a\n    vendor: nvidia\n    family: ampere\n    memory_bytes: 1000\n    memory_basis: guessed\n";
  try {
    parse_gpu_catalog(cat, "cat.yaml").find("card-a");
    FAIL("an unknown memory_basis must be refused");
  } catch (const InputError& e) {
    CHECK(e.render() == "cat.yaml:11:5: error: unknown memory_basis 'guessed'\nhint: memory_basis is measured, printed, printed-mib or nominal");
  }
  CHECK(parse_gpu_catalog(cat.substr(0, cat.find("    memory_basis")), "cat.yaml").find("card-a")->memory_basis.empty());
}

TEST_CASE("GPU suggestions for typos") {
  const GpuCatalog& c = gpu_catalog();
  REQUIRE_FALSE(c.suggest("rtx-3090ti").empty());
  CHECK(c.suggest("rtx-3090ti").front() == "rtx-3090-ti");
  CHECK(c.suggest("a100-8gb").front() == "a100-80gb");
  CHECK(c.suggest("h100-80").front() == "h100-80gb");
  CHECK(c.suggest("qqqqqqqqqqqq").empty());
  CHECK(nearest("num_head", {"num_heads", "num_layers", "hidden_size"}) == std::vector<std::string>{"num_heads"});
  CHECK(edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("apply_gpu takes capacity and overheads from the preset and its family") {
  const GpuCatalog& c = gpu_catalog();
  TrainingSetup s;
  apply_gpu(s, *c.find("rtx-3090"), c);
  CHECK(s.device.name == "rtx-3090");
  CHECK(s.device.kind == DeviceKind::cuda);
  CHECK(s.device.family == "ampere");
  CHECK(s.device.capacity_bytes == 25'414'860'800);
  CHECK(s.device.cuda_context_bytes == 268'435'456);
  CHECK(s.device.cublas_workspace_bytes == 8'519'680);
  CHECK(s.device.peak_flops == 71.0e12);
  apply_gpu(s, *c.find("h100-80gb"), c);
  CHECK(s.device.cublas_workspace_bytes == 33'554'432);  // sm90: 32 MiB
  apply_gpu(s, *c.find("m2-16gb"), c);  // unified memory: Metal's working-set share of 16 GiB
  CHECK(s.device.capacity_bytes == std::llround(17'179'869'184.0 * 0.667));
  CHECK(s.device.cuda_context_bytes == 0);
  CHECK(s.device.kind == DeviceKind::cuda);
}

TEST_CASE("the 8-12 GB consumer cards people ask about are presets") {
  const GpuCatalog& c = gpu_catalog();
  struct Want { const char* name; const char* family; int64_t gib; bool bf16; };
  for (const Want& w : {Want{"rtx-2080", "turing", 8, false}, Want{"rtx-2080-ti", "turing", 11, false}, Want{"rtx-3070", "ampere", 8, true},
                        Want{"rtx-4060", "ada", 8, true}, Want{"rtx-4070", "ada", 12, true}, Want{"rtx-3080", "ampere", 10, true},
                        Want{"rtx-4060-ti-16gb", "ada", 16, true}, Want{"rtx-4070-ti-super", "ada", 16, true}}) {
    CAPTURE(w.name);
    const GpuProfile* g = c.find(w.name);
    REQUIRE(g != nullptr);
    CHECK(g->family == w.family);
    CHECK(g->bf16 == w.bf16);
    CHECK(std::llround(static_cast<double>(g->memory_bytes) / (1 << 30)) == w.gib);
  }
  CHECK(c.find("NVIDIA GeForce RTX 4070")->name == "rtx-4070");
}

TEST_CASE("gpus.yaml: a compute capability that is not CUDA's major.minor is refused at its line, not an internal error") {
  const std::string head = "schema: memplan.gpus/v1\nfamilies:\n  - name: ampere\n    cuda_context_bytes: 1\n    cublas_workspace_bytes: 2\n"
                           "gpus:\n  - name: card-a\n    vendor: nvidia\n    family: ampere\n    memory_bytes: 1000\n";
  // 99999999999.5 overflowed std::stoi when the card was used ("internal error: stoi").
  for (const std::string bad : {"99999999999.5", "123.4", "9", "9.10", ".5", "9.x", "sm_90"}) {
    CAPTURE(bad);
    try {
      parse_gpu_catalog(head + "    compute_capability: \"" + bad + "\"\n", "cat.yaml").find("card-a");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where().line == 11);
      CHECK(e.message() == "compute_capability must look like 9.0 or 12.1 (got '" + bad + "')");
    }
  }
  for (const std::string good : {"7.5", "9.0", "12.1"})
    CHECK(parse_gpu_catalog(head + "    compute_capability: \"" + good + "\"\n", "cat.yaml").find("card-a")->compute_capability == good);
}
