// keep_user_file (planner/keep.cpp): the user's file with only what the emitter's two files
// differ in. Text edits that keep comments, quoting and order; keys added into the right map,
// removed with what they leave empty; synonyms and LightningCLI's init_args; JSON; a second
// plan over a kept file; and what cannot be placed refused with KeepError, never a crash.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>

#include "planner/keep.h"

using namespace memplan::planner;

namespace {

// The body after memplan's header.
std::string body(const std::string& kept) {
  const std::string end = "# memplan's header ends here\n";
  const size_t at = kept.find(end);
  REQUIRE(at != std::string::npos);
  return kept.substr(at + end.size());
}

const char* kBefore = "# memplan 0.1.0 plan: x\nbatch_size: 4\noptimizer:\n  lr: 2e-5\n  fused: true\nenable_activation_checkpointing: False\n";
const char* kAfter = "# memplan 0.1.0 plan: x\n# Re-check: memplan estimate --config THIS_FILE --gpu t4\nbatch_size: 1\n"
                     "optimizer:\n  lr: 2e-5\n  fused: true\nenable_activation_checkpointing: True\ngradient_accumulation_steps: 32\n";

}  // namespace

TEST_CASE("a changed value is replaced in place; comments, order and the user's other values stay") {
  const std::string user =
      "# my run\n"
      "batch_size: 4   # fits a 3090\n"
      "\n"
      "optimizer:\n"
      "  _component_: torch.optim.AdamW\n"
      "  lr: 3e-4  # tuned\n"
      "  fused: True\n"
      "enable_activation_checkpointing: False  # True reduces memory\n"
      "dataset:\n"
      "  packed: False\n";
  const KeptFile k = keep_user_file(user, kBefore, kAfter, "run.yaml");
  CHECK(body(k.text) ==
        "# my run\n"
        "batch_size: 1   # fits a 3090\n"
        "\n"
        "optimizer:\n"
        "  _component_: torch.optim.AdamW\n"
        "  lr: 3e-4  # tuned\n"
        "  fused: True\n"
        "enable_activation_checkpointing: True  # True reduces memory\n"
        "dataset:\n"
        "  packed: False\n"
        "gradient_accumulation_steps: 32\n");
  REQUIRE(k.changes.size() == 3);
  CHECK(k.changes[0] == "batch_size: 4 -> 1");
  CHECK(k.changes[1] == "enable_activation_checkpointing: False -> True");
  CHECK(k.changes[2] == "+ gradient_accumulation_steps: 32");
  // The emitter's header heads the file (its re-check line included), then what changed.
  CHECK(k.text.rfind("# memplan 0.1.0 plan: x\n# Re-check: memplan estimate --config THIS_FILE --gpu t4\n"
                     "# The rest is run.yaml as it was, with what the plan changes:\n#   batch_size: 4 -> 1\n", 0) == 0);
}

TEST_CASE("keys are added into the map that holds them, at its indentation, and a missing map with them") {
  const std::string before = "model:\n  lora_rank: 8\n";
  const std::string after = "model:\n  lora_rank: 8\n  lora_alpha: 16\ntokenizer:\n  max_seq_len: 2048\n";
  const std::string user = "model:\n    _component_: m.lora\n    lora_rank: 8   # r\n\nseed: 1\n";
  const KeptFile k = keep_user_file(user, before, after, "u.yaml");
  CHECK(body(k.text) == "model:\n    _component_: m.lora\n    lora_rank: 8   # r\n    lora_alpha: 16\n\nseed: 1\ntokenizer:\n  max_seq_len: 2048\n");
  REQUIRE(k.changes.size() == 2);
  CHECK(k.changes[1] == "+ tokenizer: {max_seq_len: 2048}");
}

TEST_CASE("a value of another shape replaces the entry; a flow list and a quoted value in place") {
  const std::string before = "strategy: ddp\nmodules: [q_proj, v_proj]\nname: \"a\"\n";
  const std::string after =
      "strategy:\n  class_path: DeepSpeedStrategy\n  init_args:\n    stage: 2\nmodules: [q_proj, k_proj, v_proj]\nname: \"b c\"\n";
  const std::string user = "strategy: ddp  # was\nmodules: [\n  q_proj, v_proj\n]\nname: 'a'\nafter: 1\n";
  const KeptFile k = keep_user_file(user, before, after, "u.yaml");
  CHECK(body(k.text) ==
        "strategy:\n  class_path: DeepSpeedStrategy\n  init_args:\n    stage: 2\nmodules: [q_proj, k_proj, v_proj]\nname: \"b c\"\nafter: 1\n");
}

TEST_CASE("what the plan drops goes, with the largest part of the file the plan has none of") {
  const std::string before = "micro_batch_size: 1\nfsdp:\n  - full_shard\nfsdp_config:\n  offload_params: true\n";
  const std::string after = "micro_batch_size: 4\n";
  const std::string user =
      "micro_batch_size: 1\nfsdp:\n  - full_shard\n  - auto_wrap\nfsdp_config:\n  fsdp_offload_params: true\n  fsdp_use_orig_params: false\n"
      "special_tokens:\n  pad_token: <pad>\n";
  const KeptFile k = keep_user_file(user, before, after, "u.yaml");
  CHECK(body(k.text) == "micro_batch_size: 4\nspecial_tokens:\n  pad_token: <pad>\n");
  REQUIRE(k.changes.size() == 3);
  CHECK(k.changes[1] == "- fsdp");
  CHECK(k.changes[2] == "- fsdp_config");
}

TEST_CASE("a change goes to the name the user's file uses, and into LightningCLI's init_args") {
  KeyVocabulary v;
  v.synonyms = {{"dtype", "torch_dtype"}, {"offload_params", "fsdp_offload_params"}};
  v.see_through = {"init_args"};
  const std::string before = "dtype: bfloat16\nfsdp_config:\n  offload_params: true\ndata:\n  batch_size: 2\n";
  const std::string after = "dtype: float32\nfsdp_config:\n  offload_params: false\ndata:\n  batch_size: 4\n";
  const std::string user =
      "torch_dtype: bfloat16\nfsdp_config:\n  fsdp_offload_params: true\ndata:\n  class_path: my.Data\n  init_args:\n    batch_size: 2\n";
  const KeptFile k = keep_user_file(user, before, after, "u.yaml", v);
  CHECK(body(k.text) ==
        "torch_dtype: float32\nfsdp_config:\n  fsdp_offload_params: false\ndata:\n  class_path: my.Data\n  init_args:\n    batch_size: 4\n");
  CHECK(k.changes[0] == "torch_dtype: bfloat16 -> float32");
  // Without the vocabulary the change lands beside the user's own key.
  const KeptFile plain = keep_user_file(user, before, after, "u.yaml");
  CHECK(body(plain.text).find("dtype: float32") != std::string::npos);
  CHECK(body(plain.text).find("torch_dtype: bfloat16") != std::string::npos);
}

TEST_CASE("a JSON file is changed as JSON, its key order kept") {
  const std::string before = "{\n  \"train_batch_size\": 16,\n  \"fp16\": {\"enabled\": true},\n  \"zero_optimization\": {\"stage\": 3}\n}\n";
  const std::string after = "{\n  \"train_batch_size\": 16,\n  \"bf16\": {\"enabled\": true},\n  \"zero_optimization\": {\"stage\": 2}\n}\n";
  const std::string user = "{\"train_batch_size\": 16, \"steps_per_print\": 1, \"zero_optimization\": {\"stage\": 3, \"overlap_comm\": true},"
                           " \"fp16\": {\"enabled\": true, \"loss_scale\": 0}}";
  const KeptFile k = keep_user_file(user, before, after, "ds.json");
  CHECK(k.text ==
        "{\n  \"train_batch_size\": 16,\n  \"steps_per_print\": 1,\n  \"zero_optimization\": {\n    \"stage\": 2,\n    \"overlap_comm\": true\n  },\n"
        "  \"bf16\": {\n    \"enabled\": true\n  }\n}\n");
  // A YAML emission into a JSON file: its scalars typed as YAML reads them, quoted ones strings.
  const KeptFile y = keep_user_file("{\"a\": 1}", "a: 1\nb: x\n", "a: 2\nb: \"2\"\nc: 1.5e-5\nd: true\n", "h.json");
  CHECK(y.text == "{\n  \"a\": 2,\n  \"b\": \"2\",\n  \"c\": 1.5e-05,\n  \"d\": true\n}\n");
}

TEST_CASE("planning over a kept file replaces memplan's header, not the user's comments") {
  const std::string user = "# mine\nbatch_size: 4\noptimizer:\n  lr: 2e-5\n  fused: true\n";
  const KeptFile once = keep_user_file(user, kBefore, kAfter, "u.yaml");
  const KeptFile twice = keep_user_file(once.text, kAfter, kAfter, "u.yaml");
  CHECK(body(twice.text) == body(once.text));
  CHECK(twice.changes.empty());
  CHECK(twice.text.find("nothing changed (it holds the plan)") != std::string::npos);
  CHECK(twice.text.find("# mine\n") != std::string::npos);
  // A file memplan emitted whole: its opening comments are memplan's.
  const KeptFile fresh = keep_user_file(std::string(kAfter), kAfter, kAfter, "u.yaml");
  CHECK(body(fresh.text).rfind("batch_size: 1\n", 0) == 0);
}

TEST_CASE("what cannot be placed is a KeepError, and hostile text never crashes") {
  CHECK_THROWS_AS(keep_user_file("- a\n- b\n", kBefore, kAfter, "u.yaml"), KeepError);
  CHECK_THROWS_AS(keep_user_file("batch_size: [1, 2\n", kBefore, kAfter, "u.yaml"), KeepError);
  CHECK_THROWS_AS(keep_user_file("{\"a\": ", kBefore, kAfter, "u.json"), KeepError);
  CHECK_THROWS_AS(keep_user_file("[1]", kBefore, kAfter, "u.json"), KeepError);
  // A key inside a flow map that must change shape.
  CHECK_THROWS_AS(keep_user_file("o: {s: ddp}\n", "o:\n  s: ddp\n", "o:\n  s:\n    stage: 2\n", "u.yaml"), KeepError);
  // A flow map still takes a scalar in place.
  CHECK(body(keep_user_file("o: {s: 1, t: 2}\n", "o:\n  s: 1\n", "o:\n  s: 3\n", "u.yaml").text) == "o: {s: 3, t: 2}\n");
  // An empty file gets the changes; a value left empty (`key:`) is replaced.
  CHECK(body(keep_user_file("", "a: 1\n", "a: 2\n", "u.yaml").text) == "a: 2\n");
  CHECK(body(keep_user_file("a:\nb: 1\n", "a: 1\n", "a: 2\n", "u.yaml").text) == "a: 2\nb: 1\n");
  // Whatever comes back parses.
  for (const char* text : {"a: 'x''y'\nbatch_size: \"4\" # c\n", "batch_size: |\n  4\n", "batch_size: &x 4\nb: *x\n", "\tbatch_size: 4\n",
                           "batch_size: 4\r\noptimizer:\r\n  lr: 1\r\n"}) {
    CAPTURE(text);
    try {
      const KeptFile k = keep_user_file(text, kBefore, kAfter, "u.yaml");
      CHECK_NOTHROW(YAML::Load(k.text));
    } catch (const KeepError&) {
    }
  }
}
