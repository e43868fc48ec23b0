// libFuzzer target: keep_user_file (planner/keep.cpp) over any user file, YAML or JSON, with the
// edits memplan's emitters make (a value changed in place, a key added to a map and a map added,
// a shape change, a removal with its emptied parent, synonyms and LightningCLI's init_args).
// Invariants: KeepError is the only way out; what comes back parses as YAML (JSON is YAML); the
// same edit made again on what came back changes nothing (it finds every key where it put it).
#include <yaml-cpp/yaml.h>

#include "planner/keep.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

struct Edit {
  const char* before;
  const char* after;
};

// What the emitters' before/after pairs look like (torchtune, Axolotl, HF, Lightning, DeepSpeed).
constexpr Edit kEdits[] = {
    {"batch_size: 4\noptimizer:\n  lr: 2e-5\nenable_activation_checkpointing: False\n",
     "batch_size: 1\noptimizer:\n  lr: 2e-5\nenable_activation_checkpointing: True\ngradient_accumulation_steps: 32\n"},
    {"micro_batch_size: 2\nfsdp:\n  - full_shard\nfsdp_config:\n  offload_params: true\n", "micro_batch_size: 4\n"},
    {"dtype: bfloat16\nfsdp_config:\n  offload_params: true\ndata:\n  batch_size: 2\n",
     "dtype: float32\nfsdp_config:\n  offload_params: false\ndata:\n  batch_size: 4\ntokenizer:\n  max_seq_len: 2048\n"},
    {"trainer:\n  strategy: ddp\nmodules: [q_proj, v_proj]\n",
     "trainer:\n  strategy:\n    class_path: DeepSpeedStrategy\n    init_args:\n      stage: 2\nmodules: [q_proj, k_proj]\n"},
    {"{\"train_batch_size\": 16, \"fp16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3}}",
     "{\"train_batch_size\": 16, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 2}, \"tensor_parallel\": {\"autotp_size\": 2}}"},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memplan::planner;
  if (size < 1) return 0;
  const Edit& e = kEdits[data[0] % (sizeof(kEdits) / sizeof(kEdits[0]))];
  const std::string user(reinterpret_cast<const char*>(data) + 1, size - 1);
  KeyVocabulary v;
  v.synonyms = {{"dtype", "torch_dtype"}, {"offload_params", "fsdp_offload_params"}};
  v.see_through = {"init_args"};
  try {
    const KeptFile k = keep_user_file(user, e.before, e.after, "fuzz.yaml", v);
    try {
      YAML::Load(k.text);
    } catch (const YAML::Exception& x) {
      memplan::fuzz::fail(fmt::format("keep_user_file returned text that does not parse: {}", x.what()));
    }
    const KeptFile again = keep_user_file(k.text, e.before, e.after, "fuzz.yaml", v);
    if (!again.changes.empty()) memplan::fuzz::fail("the same edit made twice changes again: " + again.changes.front());
  } catch (const KeepError&) {
  }
  return 0;
}
