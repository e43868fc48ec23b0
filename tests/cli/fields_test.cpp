// The setup registry (estimator/fields.h), row by row and both ways, switches and counts: the flag
// sets the field (its provenance: the flag), `estimate --json` shows it in setup and setup.sources,
// the memplan YAML `plan --emit memplan` writes carries it, and reading that file back builds the
// same setup; every YAML key and alias of the row reads into the field with its file:line. A row
// added to a table is covered here without a line of test; one that needs other settings to mean
// anything (fp8_recompute_weight needs fp8, tensor_parallel more GPUs) gets them in contexts() or
// count_case().
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cli/cli.h"
#include "cli/common.h"
#include "estimator/fields.h"
#include "planner/emit.h"
#include "planner/request.h"
#include "profiles/profiles.h"

using nlohmann::json;
using namespace memplan;
namespace fs = std::filesystem;

namespace {

// What a switch needs around it to be in effect: flags, and the same as memplan YAML lines of
// each section, each "  key: value\n" (the switch's own line is written by the test).
struct Context {
  std::vector<std::string> flags;
  std::string hardware_yaml, training_yaml, runtime_yaml, lora_yaml;
};
const std::map<Switch, Context>& contexts() {
  static const std::map<Switch, Context> c = {
      {Switch::compile_loss, {{"--compile"}, "", "", "  compile: true\n", ""}},
      {Switch::fsdp_no_sync,
       {{"--fsdp", "full", "--gpus", "2", "--grad-accum", "2"}, "  num_gpus: 2\n", "  gradient_accumulation_steps: 2\n",
        "  fsdp: full\n", ""}},
      {Switch::fp8_recompute_weight, {{"--fp8"}, "", "", "  fp8: true\n", ""}},
      {Switch::double_quant, {{"--finetune", "qlora"}, "", "", "", "  method: qlora\n"}},
      {Switch::sequence_parallel, {{"--tensor-parallel", "2", "--gpus", "2"}, "  num_gpus: 2\n", "  tensor_parallel: 2\n", "", ""}},
  };
  return c;
}
Context context(Switch id) {
  const auto it = contexts().find(id);
  return it == contexts().end() ? Context{} : it->second;
}

const std::vector<std::string> kBase = {"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--seq-len", "256"};

std::vector<std::string> flags_for(const SwitchField& f, bool v) {
  std::vector<std::string> a = kBase;
  for (const std::string& x : context(f.id).flags) a.push_back(x);
  a.push_back(v ? std::string(f.flag) : f.negation());
  return a;
}

profiles::BuiltSetup build_from_flags(const std::vector<std::string>& args) {
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  std::vector<const char*> argv = {"memplan"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return profiles::build_setup(in);
}

profiles::BuiltSetup build_from_yaml(const std::string& text, const std::string& name = "switch.yaml") {
  const profiles::LoadedConfig cfg = profiles::load_config_text(text, name, name);
  profiles::SetupInputs in;
  in.config = name;
  return profiles::build_setup(in, cfg);
}

// The file `plan --emit` writes for `s` in `format` (llama-3.2-1b on the preset `gpu`; "": none).
std::string emitted(const TrainingSetup& s, planner::EmitFormat format, const std::string& gpu = "h100-80gb") {
  planner::EmitContext c;
  c.setup = s;
  c.model = {planner::ModelRef::Kind::preset, "llama-3.2-1b"};
  c.gpu = gpu;
  c.global_batch = s.batch.micro_batch * s.batch.grad_accum * s.parallel.data_parallel();
  return planner::emit(c, format);
}
// The memplan YAML `plan --emit memplan` writes for `s`.
std::string emitted_yaml(const TrainingSetup& s, const std::string& gpu = "h100-80gb") {
  return emitted(s, planner::EmitFormat::memplan, gpu);
}

json estimate_json(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"memplan", "estimate", "--json"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& a : all) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  INFO(err.str());
  REQUIRE((code == 0 || code == 1));
  return json::parse(out.str());
}

// One row set to `v` by `args` (its flag last, with its value after it unless a switch), both ways:
// the flag sets the field (its provenance: the flag as given, --no-liger for off), `estimate --json`
// names that flag in setup.sources, and the memplan YAML `plan --emit memplan` writes for the setup
// reads back to the same setup. Returns estimate's `setup` document.
template <class Field, class Value>
json check_round_trip(const Field& f, const std::vector<std::string>& args, const Value& v) {
  const std::string& flag = args.at(args.size() - (std::is_same_v<Value, bool> ? 1 : 2));  // as given: --liger, --no-liger
  const profiles::BuiltSetup b = build_from_flags(args);
  CHECK(f.get(b.setup) == v);
  CHECK(b.origin.of(f.id).flag == flag);
  const json setup = estimate_json(args).at("setup");
  CHECK(setup.at("sources").at(f.path) == flag);
  const std::string yaml = emitted_yaml(b.setup);
  CAPTURE(yaml);
  const profiles::BuiltSetup back = build_from_yaml(yaml);
  CHECK(f.get(back.setup) == v);
  // The whole setup reads back, not only this row.
  CHECK(cli::setup_json(back.setup) == cli::setup_json(b.setup));
  return setup;
}

}  // namespace

// Each registry's test checks its own rows; this one that no two rows of any registries share a
// setup path or a flag (a number without a flag, a threshold, has a path only).
TEST_CASE("every registry: each setup path and each flag is one row's") {
  std::map<std::string, int> paths, flags;
  auto add = [&](const char* path, const char* flag) {
    ++paths[path];
    if (flag) ++flags[flag];
  };
  for (const SwitchField& f : switch_fields()) add(f.path, f.flag);
  for (const CountField& f : count_fields()) add(f.path, f.flag);
  for (const ChoiceField& f : choice_fields()) add(f.path, f.flag);
  for (const NumberField& f : number_fields()) add(f.path, f.flag);
  for (const ListField& f : list_fields()) add(f.path, f.flag);
  for (const SizeField& f : size_fields()) add(f.path, f.flag);
  for (const VersionField& f : version_fields()) add(f.path, f.flag);
  for (const TargetField& f : target_fields()) add(f.path, f.flag);
  for (const SettingField& f : setting_fields()) add(f.path, nullptr);
  for (const ModelField& f : model_fields()) add(f.path.c_str(), nullptr);
  CHECK(paths.size() == kSwitchCount + kCountCount + kChoiceCount + kNumberCount + kListCount + kSizeCount + kVersionCount +
                            kTargetCount + kSettingCount + model_fields().size());
  for (const auto& path : paths) {  // not structured bindings: CAPTURE's lambda cannot take them (clang < 16)
    CAPTURE(path.first);
    CHECK(path.second == 1);
  }
  for (const auto& flag : flags) {
    CAPTURE(flag.first);
    CHECK(flag.second == 1);
  }
}

TEST_CASE("switch registry: paths, flags and keys are unique, every row is in order and registered on the commands") {
  std::set<std::string> paths, flags;
  std::map<std::string, std::set<std::string>> keys;  // by section
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  for (size_t i = 0; i < kSwitchCount; ++i) {
    const SwitchField& f = switch_fields()[i];
    const std::string shown_path = f.path;
        CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(paths.insert(f.path).second);
    CHECK(flags.insert(f.flag).second);
    CHECK(std::string(f.flag).rfind("--", 0) == 0);
    const std::string section = f.section();
    CHECK((section == "runtime" || section == "finetune" || section == "parallel"));
    CHECK(keys[section].insert(f.key()).second);
    for (const char* a : f.aliases)
      if (a) CHECK(keys[section].insert(a).second);
    CHECK(std::string(f.help).size() > 10);
    CHECK(std::string(f.default_source).size() > 10);
    // Both spellings are options of every command that takes the setup flags.
    CHECK(app.get_option_no_throw(f.flag) != nullptr);
    CHECK(app.get_option_no_throw(f.negation()) != nullptr);
    // The member behind the path: set and read back.
    TrainingSetup s;
    const bool was = f.get(s);
    f.set(s, !was);
    CHECK(f.get(s) == !was);
  }
}

TEST_CASE("switch registry: flag -> setup -> estimate JSON -> memplan YAML -> setup, for every row and both values") {
  for (const SwitchField& f : switch_fields()) {
    for (const bool v : {true, false}) {
      const std::string shown_path = f.path;
        CAPTURE(shown_path);
      CAPTURE(v);
      const json setup = check_round_trip(f, flags_for(f, v), v);
      if (f.section() == "runtime") CHECK(setup.at("runtime").at(f.key()) == v);
    }
  }
}

TEST_CASE("switch registry: each YAML key and alias reads into its field, noted at its line") {
  for (const SwitchField& f : switch_fields()) {
    std::vector<std::string> names = {f.key()};
    for (const char* a : f.aliases)
      if (a) names.emplace_back(a);
    const Context ctx = context(f.id);
    for (const std::string& name : names) {
      for (const bool v : {true, false}) {
        const std::string shown_path = f.path;
        CAPTURE(shown_path);
        CAPTURE(name);
        std::string y = "model: llama-3.2-1b\nhardware:\n  gpu: h100-80gb\n" + ctx.hardware_yaml;
        y += "training:\n  seq_len: 256\n" + ctx.training_yaml;
        int line = 0;
        auto count_lines = [&y] { return static_cast<int>(std::count(y.begin(), y.end(), '\n')); };
        const std::string value = v ? "true" : "false";
        const std::string section = f.section();
        if (section == "parallel") {
          line = count_lines() + 1;
          y += fmt::format("  {}: {}\n", name, value);
        }
        if (section == "runtime" || !ctx.runtime_yaml.empty()) y += "runtime:\n" + ctx.runtime_yaml;
        if (section == "runtime") {
          line = count_lines() + 1;
          y += fmt::format("  {}: {}\n", name, value);
        }
        if (section == "finetune" || !ctx.lora_yaml.empty()) {
          y += "lora:\n" + ctx.lora_yaml;
          if (section == "finetune") {
            line = count_lines() + 1;
            y += fmt::format("  {}: {}\n", name, value);
          }
        }
        CAPTURE(y);
        const profiles::BuiltSetup b = build_from_yaml(y);
        CHECK(f.get(b.setup) == v);
        const Where w = b.origin.of(f.id);
        CHECK(w.file == "switch.yaml");
        CHECK(w.line == line);
      }
    }
  }
}

// ---- counts ------------------------------------------------------------------------------------

namespace {

// A count's test value and what it needs around it: flags, and memplan YAML lines by section.
struct CountCase {
  int64_t value;
  std::vector<std::string> flags;
  std::map<std::string, std::string> yaml;  // section -> "  key: value\n" lines
};
CountCase count_case(Count id) {
  switch (id) {
    case Count::num_gpus: return {2, {}, {}};
    case Count::micro_batch: return {3, {}, {}};
    case Count::seq_len: return {384, {}, {}};
    case Count::grad_accum: return {4, {}, {}};
    case Count::tensor_parallel: return {2, {"--gpus", "2"}, {{"hardware", "  num_gpus: 2\n"}}};
    case Count::pipeline_parallel: return {2, {"--gpus", "2"}, {{"hardware", "  num_gpus: 2\n"}}};
    case Count::expert_parallel: return {2, {"--gpus", "2"}, {{"hardware", "  num_gpus: 2\n"}}};
    case Count::zero_stage: return {2, {"--gpus", "2"}, {{"hardware", "  num_gpus: 2\n"}}};
    case Count::gpus_per_node: return {4, {}, {}};
    case Count::lora_rank: return {16, {"--finetune", "lora"}, {{"finetune", "  method: lora\n"}}};
    case Count::freeze_layers: return {4, {}, {}};
    case Count::count: break;
  }
  FAIL("no test case for a count");
  return {};
}

std::vector<std::string> count_flags(const CountField& f) {
  std::vector<std::string> a = {"--model", "llama-3.2-1b", "--gpu", "h100-80gb"};
  if (f.id != Count::seq_len) a.insert(a.end(), {"--seq-len", "256"});
  const CountCase c = count_case(f.id);
  a.insert(a.end(), c.flags.begin(), c.flags.end());
  a.insert(a.end(), {f.flag, std::to_string(c.value)});
  return a;
}

}  // namespace

TEST_CASE("count registry: paths, flags and keys are unique, every row is in order and registered on the commands") {
  std::set<std::string> paths, flags;
  std::map<std::string, std::set<std::string>> keys;  // by section
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  for (size_t i = 0; i < kCountCount; ++i) {
    const CountField& f = count_fields()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(paths.insert(f.path).second);
    CHECK(flags.insert(f.flag).second);
    CHECK(app.get_option_no_throw(f.flag) != nullptr);
    const std::string section = f.section;
    CHECK((section == "training" || section == "data" || section == "hardware" || section == "finetune"));
    REQUIRE(f.keys[0] != nullptr);
    for (const char* k : f.keys)
      if (k) CHECK(keys[section].insert(k).second);
    CHECK(std::string(f.help).size() > 10);
    CHECK(std::string(f.words).size() > 3);
    CHECK(std::string(f.default_source).size() > 10);
    CHECK(count_at(f.path) == &f);
    TrainingSetup s;
    f.set(s, f.get(s) + 5);
    CHECK(f.get(s) == f.get(TrainingSetup{}) + 5);
  }
  CHECK(count_at("batch.micro_batches") == nullptr);
}

TEST_CASE("count registry: flag -> setup -> estimate JSON -> memplan YAML -> setup, for every row") {
  for (const CountField& f : count_fields()) {
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    const int64_t v = count_case(f.id).value;
    REQUIRE(v != f.get(TrainingSetup{}));  // a value the reader would not give by default
    const json setup = check_round_trip(f, count_flags(f), v);
    CHECK(setup.at(f.json_section()).at(f.json_key()) == v);
  }
}

TEST_CASE("count registry: each YAML key reads into its field in its section, noted at its line") {
  for (const CountField& f : count_fields()) {
    const CountCase c = count_case(f.id);
    for (const char* key : f.keys) {
      if (!key) continue;
      const std::string shown_path = f.path;
      CAPTURE(shown_path);
      CAPTURE(key);
      std::map<std::string, std::string> sections = c.yaml;
      sections["hardware"] = "  gpu: h100-80gb\n" + sections["hardware"];
      if (f.id != Count::seq_len) sections["training"] += "  seq_len: 256\n";
      std::string y = "model: llama-3.2-1b\n";
      int line = 0;
      for (const char* name : {"hardware", "training", "data", "finetune"}) {
        const bool own = f.section == std::string(name);
        if (sections[name].empty() && !own) continue;
        y += std::string(name) + ":\n" + sections[name];
        if (own) {
          line = static_cast<int>(std::count(y.begin(), y.end(), '\n')) + 1;
          y += fmt::format("  {}: {}\n", key, c.value);
        }
      }
      CAPTURE(y);
      const profiles::BuiltSetup b = build_from_yaml(y);
      CHECK(f.get(b.setup) == c.value);
      const Where w = b.origin.of(f.id);
      CHECK(w.file == "switch.yaml");
      CHECK(w.line == line);
    }
  }
}

TEST_CASE("count registry: a count below its floor is refused at the key or by validate(), at the file's line") {
  for (const CountField& f : count_fields()) {
    // 0 is their default: validate() bounds frozen layers by the model's, the ZeRO stage to 0-3 (below).
    if (f.id == Count::freeze_layers || f.id == Count::zero_stage) continue;
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    const CountCase c = count_case(f.id);
    std::map<std::string, std::string> sections = c.yaml;
    sections["hardware"] = "  gpu: h100-80gb\n" + sections["hardware"];
    std::string y = "model: llama-3.2-1b\n";
    int line = 0;
    for (const char* name : {"hardware", "training", "data", "finetune"}) {
      const bool own = f.section == std::string(name);
      if (sections[name].empty() && !own) continue;
      y += std::string(name) + ":\n" + sections[name];
      if (own) {
        line = static_cast<int>(std::count(y.begin(), y.end(), '\n')) + 1;
        y += fmt::format("  {}: 0\n", f.keys[0]);
      }
    }
    CAPTURE(y);
    try {
      (void)build_from_yaml(y);
      FAIL("accepted 0");
    } catch (const InputError& e) {
      CHECK(e.where().line == line);
      // Refused at the key ("lora.r must be a positive integer") or by validate() ("batch.micro_batch:
      // must be at least 1 (got 0)"), as the row's reader says.
      CAPTURE(e.message());
      if (f.read == CountRead::at_least_one) CHECK(e.message().find("must be a positive integer") != std::string::npos);
      else CHECK(e.message().rfind(std::string(f.path) + ": ", 0) == 0);
    }
  }
}

TEST_CASE("count registry: the ZeRO stage outside 0-3 is refused at the flag, at the key and in a deepspeed: section") {
  for (const char* bad : {"4", "-1", "99999999999"}) {
    CAPTURE(bad);
    try {
      (void)build_from_flags({"--model", "llama-3.2-1b", "--zero", bad});
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where().flag == "--zero");
      CHECK(e.message().find(fmt::format("ZeRO stage must be 0, 1, 2 or 3 (got {})", bad)) != std::string::npos);
    }
    for (const std::string& y : {fmt::format("model: llama-3.2-1b\ntraining:\n  zero_stage: {}\n", bad),
                                 fmt::format("model: llama-3.2-1b\ntraining:\n  deepspeed:\n    stage: {}\n", bad)}) {
      CAPTURE(y);
      try {
        (void)build_from_yaml(y);
        FAIL("accepted");
      } catch (const InputError& e) {
        CHECK(e.where().line == static_cast<int>(std::count(y.begin(), y.end(), '\n')));
        CHECK(e.message() == fmt::format("parallel.zero_stage: ZeRO stage must be 0, 1, 2 or 3 (got {})", bad));
      }
    }
  }
  // Both spellings of the deepspeed: section read it, noted at their line.
  const profiles::BuiltSetup b = build_from_yaml("model: llama-3.2-1b\nhardware:\n  num_gpus: 2\ntraining:\n  deepspeed:\n    zero_stage: 3\n");
  CHECK(b.setup.parallel.zero_stage == 3);
  CHECK(b.origin.of(Count::zero_stage).line == 6);
}

TEST_CASE("count registry: the emitted files carry each count to a re-check, and none at its default") {
  // At the defaults: the memplan YAML writes only the counts it always writes.
  const profiles::BuiltSetup plain = build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb"});
  const std::string yaml = emitted_yaml(plain.setup);
  CAPTURE(yaml);
  for (const CountField& f : count_fields()) {
    const bool always = f.id == Count::num_gpus || f.id == Count::micro_batch || f.id == Count::grad_accum || f.id == Count::seq_len;
    CHECK((yaml.find(fmt::format("\n  {}: ", f.keys[0])) != std::string::npos) == always);
  }
  CHECK(yaml.find("finetune:") == std::string::npos);
  // Each count set: the training script's config and the DeepSpeed config (its memplan block)
  // read back to the same value (DeepSpeed's own keys or AutoTP hold the batch and tensor parallelism).
  for (const CountField& f : count_fields()) {
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    std::vector<std::string> args = count_flags(f);
    if (f.id != Count::zero_stage) args.insert(args.end(), {"--zero", "1"});  // the DeepSpeed config needs a stage
    const profiles::BuiltSetup b = build_from_flags(args);
    for (const planner::EmitFormat format : {planner::EmitFormat::train_config, planner::EmitFormat::deepspeed}) {
      planner::EmitContext c;
      c.setup = b.setup;
      c.model = {planner::ModelRef::Kind::preset, "llama-3.2-1b"};
      c.gpu = "h100-80gb";
      c.global_batch = b.setup.batch.micro_batch * b.setup.batch.grad_accum * b.setup.parallel.data_parallel();
      const std::string text = planner::emit(c, format);
      CAPTURE(text);
      CHECK(f.get(build_from_yaml(text, format == planner::EmitFormat::deepspeed ? "ds_config.json" : "train.yaml").setup) ==
            count_case(f.id).value);
    }
  }
}

TEST_CASE("expert and pipeline parallelism: EP divides the GPUs, and only the files that state them are written with them") {
  try {
    (void)build_from_flags({"--model", "qwen3-30b-a3b", "--gpu", "h100-80gb", "--expert-parallel", "64"});
    FAIL("accepted EP 64 on one GPU");
  } catch (const InputError& e) {
    CHECK(e.where().flag == "--expert-parallel");
    CHECK(e.message() == "1 GPUs cannot be split into expert-parallel groups of 64");
  }
  const profiles::BuiltSetup b = build_from_flags({"--model", "qwen3-30b-a3b", "--gpu", "h100-80gb", "--gpus", "8", "--expert-parallel", "4"});
  CHECK(b.setup.parallel.expert_parallel == 4);
  std::string why;
  CHECK_FALSE(planner::can_express(planner::EmitFormat::hf, b.setup, &why));
  CHECK(why == "this format has no expert-parallel setting (--expert-parallel 4): plan with --emit memplan");
  CHECK(planner::can_express(planner::EmitFormat::memplan, b.setup, &why));
  // Pipeline stages the same way: the files that cannot state them are not written with them.
  const profiles::BuiltSetup pp =
      build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--gpus", "8", "--pipeline-parallel", "2"});
  for (const planner::EmitFormat f : {planner::EmitFormat::hf, planner::EmitFormat::axolotl, planner::EmitFormat::accelerate,
                                      planner::EmitFormat::lightning, planner::EmitFormat::llamafactory}) {
    CHECK_FALSE(planner::can_express(f, pp.setup, &why));
    CHECK(why == "this format has no pipeline-parallel setting (--pipeline-parallel 2): plan with --emit memplan");
  }
  for (const planner::EmitFormat f : {planner::EmitFormat::memplan, planner::EmitFormat::train_config})
    CHECK(planner::can_express(f, pp.setup, &why));
}

// ---- choices -----------------------------------------------------------------------------------

namespace {

// What a choice's value needs around it (flags): FSDP shards over more than one GPU; offloading
// needs a ZeRO stage that partitions what is offloaded (3 for the parameters).
std::vector<std::string> choice_context(Choice id) {
  if (id == Choice::fsdp) return {"--gpus", "2"};
  if (id == Choice::offload) return {"--zero", "3"};
  if (id == Choice::adapter_dtype) return {"--finetune", "lora"};  // shown and written with adapters
  return {};
}
// The same as memplan YAML: the hardware: lines and the lines of its own section before its key.
std::string choice_context_yaml(Choice id, std::string* in_section) {
  if (id == Choice::offload) *in_section = "  zero_stage: 3\n";
  if (id == Choice::adapter_dtype) *in_section = "  method: lora\n";
  return id == Choice::fsdp ? "  num_gpus: 2\n" : "";
}
// A choice's value in the setup JSON: setup.precision, setup.parallel.offload, setup.runtime.framework.
const json& choice_json(const json& setup, const ChoiceField& f) {
  return f.json_section().empty() ? setup.at(f.json_key()) : setup.at(f.json_section()).at(f.json_key());
}

}  // namespace

TEST_CASE("choice registry: rows in order, paths and flags unique across the registry, registered on the commands") {
  std::set<std::string> paths, flags;
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  for (size_t i = 0; i < kChoiceCount; ++i) {
    const ChoiceField& f = choice_fields()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(paths.insert(f.path).second);
    CHECK(flags.insert(f.flag).second);
    CHECK(app.get_option_no_throw(f.flag) != nullptr);
    CHECK(std::string(f.default_source).size() > 10);
    REQUIRE(f.names().size() >= 2);
    const std::string section = f.section;
    CHECK((section == "runtime" || section == "training" || section == "finetune"));
    // Its flag is in the Runtime group exactly when it is stated under runtime:.
    CHECK((app.get_option(f.flag)->get_group() == "Runtime") == f.runtime());
    // Every value sets the member and reads back as itself; a name of none is refused and changes nothing.
    REQUIRE(f.samples().size() >= 2);
    for (const std::string& name : f.samples()) {
      TrainingSetup s;
      CHECK(f.set(s, name));
      CHECK(f.get(s) == name);
    }
    TrainingSetup s;
    const std::string before = f.get(s);
    CHECK_FALSE(f.set(s, "no-such-name"));
    CHECK(f.get(s) == before);
  }
}

TEST_CASE("choice registry: flag -> setup -> estimate JSON -> memplan YAML -> setup, for every name of every row") {
  for (const ChoiceField& f : choice_fields()) {
    for (const std::string& name : f.samples()) {
      const std::string shown_path = f.path;
      CAPTURE(shown_path);
      CAPTURE(name);
      std::vector<std::string> args = {"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--seq-len", "256"};
      for (const std::string& a : choice_context(f.id)) args.push_back(a);
      args.insert(args.end(), {f.flag, name});
      const json setup = check_round_trip(f, args, name);
      CHECK(choice_json(setup, f) == name);

      // Its key reads it at its line, in its section.
      std::string y = "model: llama-3.2-1b\nhardware:\n  gpu: h100-80gb\n", before;
      y += choice_context_yaml(f.id, &before);
      y += std::string(f.section) + ":\n" + before;
      const int line = static_cast<int>(std::count(y.begin(), y.end(), '\n')) + 1;
      y += fmt::format("  {}: {}\n", f.key, name);
      const profiles::BuiltSetup read = build_from_yaml(y);
      CHECK(f.get(read.setup) == name);
      CHECK(read.origin.of(f.id).line == line);
    }
  }
}

TEST_CASE("choice registry: offload: none is the source only while no other key offloads") {
  const std::string head = "model: llama-3.2-1b\nhardware:\n  gpu: h100-80gb\n  num_gpus: 2\ntraining:\n  zero_stage: 3\n";
  // Alone: stated at its line (line 7).
  profiles::BuiltSetup b = build_from_yaml(head + "  offload: none\n");
  CHECK(b.setup.parallel.offload == Offload::none);
  CHECK(b.origin.of(Choice::offload).line == 7);
  // A later key that offloads is the source; an earlier one stays the source.
  b = build_from_yaml(head + "  offload: none\n  offload_optimizer: true\n");
  CHECK(b.setup.parallel.offload == Offload::optimizer);
  CHECK(b.origin.of(Choice::offload).line == 8);
  b = build_from_yaml(head + "  offload_optimizer: true\n  offload: none\n");
  CHECK(b.setup.parallel.offload == Offload::optimizer);
  CHECK(b.origin.of(Choice::offload).line == 7);
  b = build_from_yaml(head + "  offload: none\n  deepspeed:\n    offload_param: true\n");
  CHECK(b.setup.parallel.offload == Offload::params);
  CHECK(b.origin.of(Choice::offload).line == 9);
}

TEST_CASE("choice registry: the adapters' dtype is shown with adapters, written where the framework's default differs") {
  // Without adapters the setup JSON leaves it out (it means nothing); with them it is there.
  json setup = estimate_json({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--seq-len", "256"}).at("setup");
  CHECK_FALSE(setup.at("finetune").contains("adapter_dtype"));
  setup = estimate_json({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--seq-len", "256", "--finetune", "lora"}).at("setup");
  CHECK(setup.at("finetune").at("adapter_dtype") == "fp32");
  // The HF Trainer's adapters are fp32 (PEFT): --adapter-dtype model is written, and reads back.
  profiles::BuiltSetup b = build_from_flags({"--model", "llama-3.2-1b", "--finetune", "lora", "--adapter-dtype", "model"});
  std::string yaml = emitted_yaml(b.setup);
  CAPTURE(yaml);
  CHECK(yaml.find("  adapter_dtype: model\n") != std::string::npos);
  CHECK_FALSE(build_from_yaml(yaml).setup.finetune.adapter_fp32);
  // torchtune's are the model's own by default: nothing to write; fp32 there is written.
  b = build_from_flags({"--model", "llama-3.2-1b", "--finetune", "lora", "--framework", "torchtune"});
  CHECK_FALSE(b.setup.finetune.adapter_fp32);
  yaml = emitted_yaml(b.setup);
  CHECK(yaml.find("adapter_dtype") == std::string::npos);
  b = build_from_flags({"--model", "llama-3.2-1b", "--finetune", "lora", "--framework", "torchtune", "--adapter-dtype", "fp32"});
  yaml = emitted_yaml(b.setup);
  CHECK(yaml.find("  adapter_dtype: fp32\n") != std::string::npos);
  CHECK(build_from_yaml(yaml).setup.finetune.adapter_fp32);
  // A file's value in any case (a dtype's spelling: BF16), and the flag's too.
  CHECK_FALSE(build_from_yaml("model: llama-3.2-1b\nlora:\n  r: 8\n  adapter_dtype: BF16\n").setup.finetune.adapter_fp32);
  CHECK(build_from_flags({"--model", "llama-3.2-1b", "--finetune", "lora", "--adapter-dtype", "FP32"}).setup.finetune.adapter_fp32);
}

TEST_CASE("choice registry: the loss's forms keep their chunking through flag, JSON and memplan YAML") {
  for (const char* loss : {"chunked:8", "chunked:3", "chunked:4096t"}) {
    CAPTURE(loss);
    const profiles::BuiltSetup b = build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--loss", loss});
    CHECK(to_string(b.setup.runtime, b.setup.runtime.loss) == loss);
    const profiles::BuiltSetup back = build_from_yaml(emitted_yaml(b.setup));
    CHECK(back.setup.runtime.loss_chunks == b.setup.runtime.loss_chunks);
    CHECK(back.setup.runtime.loss_chunk_tokens == b.setup.runtime.loss_chunk_tokens);
  }
  // "chunked" alone is 8 chunks, and says so.
  CHECK(field(Choice::loss).get(build_from_flags({"--model", "llama-3.2-1b", "--loss", "chunked"}).setup) == "chunked:8");
  // chunked:0 is no chunking at all: refused with the forms.
  try {
    (void)build_from_flags({"--model", "llama-3.2-1b", "--loss", "chunked:0"});
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.hint().find("chunked:Nt (chunks of N tokens)") != std::string::npos);
  }
}

TEST_CASE("choice registry: an unknown name is refused with the names, at the flag and at the key") {
  for (const ChoiceField& f : choice_fields()) {
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    const std::string expected = fmt::format("unknown {} 'nope'", f.what);
    try {
      (void)build_from_flags({"--model", "llama-3.2-1b", f.flag, "nope"});
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where().flag == f.flag);
      CHECK(e.message().find(expected) != std::string::npos);
      CHECK(e.hint().find(f.names().front()) != std::string::npos);
      CHECK(e.hint() == f.refusal_hint());
    }
    std::string before;
    (void)choice_context_yaml(f.id, &before);
    try {
      const std::string y = fmt::format("model: llama-3.2-1b\n{}:\n{}  {}: nope\n", f.section, before, f.key);
      CAPTURE(y);
      (void)build_from_yaml(y);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where().line == 3 + (before.empty() ? 0 : 1));
      CHECK(e.message().find(expected) != std::string::npos);
      // The same words at the key as at the flag where the key alone reads it (a section's own
      // handlers take more spellings: torch_dtype's bfloat16, gradient_checkpointing: true).
      if (f.read == ChoiceRead::key) CHECK(e.hint() == f.refusal_hint());
    }
  }
}

// ---- numbers -----------------------------------------------------------------------------------

namespace {

// A number's test value (each differs from memplan's default and keeps the thresholds in order) and
// what it needs around it: the LoRA numbers mean something only with adapters.
double number_value(Number id) {
  switch (id) {
    case Number::lora_alpha: return 32;
    case Number::lora_dropout: return 0.1;
    case Number::target: return 0.85;
    case Number::warning: return 0.91;
    case Number::critical: return 0.96;
    case Number::emergency: return 0.99;
    case Number::count: break;
  }
  FAIL("no test value for a number");
  return 0;
}

}  // namespace

TEST_CASE("number registry: rows in order, paths and flags unique across the registries, flags registered") {
  std::set<std::string> paths, flags;
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  for (size_t i = 0; i < kNumberCount; ++i) {
    const NumberField& f = number_fields()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(paths.insert(f.path).second);
    CHECK(std::string(f.default_source).size() > 10);
    CHECK(std::string(f.help).size() > 5);
    CHECK(number_value(f.id) != f.get(TrainingSetup{}));
    if (f.flag) {
      CHECK(flags.insert(f.flag).second);
      CHECK(app.get_option_no_throw(f.flag) != nullptr);
    }
    // A number without a flag is a threshold: a plan writes its budget's, so no flag would survive.
    CHECK((f.flag == nullptr) == (std::string(f.section) == "memory"));
  }
}

TEST_CASE("number registry: flag -> setup -> estimate JSON -> memplan YAML -> setup, for every row with a flag") {
  for (const NumberField& f : number_fields()) {
    if (!f.flag) continue;
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    const double v = number_value(f.id);
    const json setup = check_round_trip(
        f, {"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--seq-len", "256", "--finetune", "lora", f.flag, fmt::format("{}", v)}, v);
    CHECK(setup.at(f.json_section()).at(f.json_key()) == v);
  }
}

TEST_CASE("number registry: each key reads into its field at its line; the setup JSON shows it where the setup uses it") {
  for (const NumberField& f : number_fields()) {
    for (const char* key : f.keys) {
      if (!key) continue;
      const std::string shown_path = f.path;
      CAPTURE(shown_path);
      CAPTURE(key);
      const double v = number_value(f.id);
      // Every spelling of its section: memory: under training: or at the top; finetune:, lora:, peft:.
      const std::vector<std::string> heads = std::string(f.section) == "memory"
                                                 ? std::vector<std::string>{"training:\n  memory:\n    ", "memory:\n  "}
                                                 : std::vector<std::string>{"finetune:\n  method: lora\n  ", "lora:\n  ",
                                                                            "peft:\n  method: lora\n  "};
      for (const std::string& head : heads) {
        const std::string y0 = "model: llama-3.2-1b\n" + head;
        const int line = static_cast<int>(std::count(y0.begin(), y0.end(), '\n')) + 1;
        const std::string y = y0 + fmt::format("{}: {}\n", key, v);
        CAPTURE(y);
        const profiles::BuiltSetup b = build_from_yaml(y);
        CHECK(f.get(b.setup) == v);
        CHECK(b.origin.of(f.id).line == line);
      }
    }
  }
  // The LoRA numbers only with adapters; the thresholds always.
  const json full = estimate_json({"--model", "llama-3.2-1b"}).at("setup");
  for (const NumberField& f : number_fields())
    CHECK(full.at(f.json_section()).contains(f.json_key()) == (std::string(f.section) == "memory"));
  // A threshold outside (0, 1] is refused at its key.
  try {
    (void)build_from_yaml("model: llama-3.2-1b\ntraining:\n  memory:\n    warning_threshold: 1.5\n");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.where().line == 4);
    CHECK(e.message() == "training.memory.warning_threshold must be a fraction in (0, 1] (got '1.5')");
  }
}

namespace {

// Releases each version row is tried with (each differs from memplan's default); a new row fails
// the tests below until it has its own.
const std::map<Version, std::vector<std::pair<int, int>>>& version_values() {
  static const std::map<Version, std::vector<std::pair<int, int>>> v = {
      {Version::torch, {{1, 13}, {2, 9}}},
      {Version::transformers, {{4, 52}, {5, 2}}},
  };
  return v;
}

}  // namespace

TEST_CASE("version registry: rows in order, paths, flags and runtime keys unique across the registries, registered on the commands") {
  std::set<std::string> paths, flags, runtime_keys;
  for (const SwitchField& f : switch_fields()) {
    if (f.section() == "runtime") {
      runtime_keys.insert(f.key());
      for (const char* a : f.aliases)
        if (a) runtime_keys.insert(a);
    }
  }
  for (const ChoiceField& f : choice_fields())  // the loss among them
    if (std::string(f.section) == "runtime") runtime_keys.insert(f.key);
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  for (size_t i = 0; i < kVersionCount; ++i) {
    const VersionField& f = version_fields()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(paths.insert(f.path).second);
    CHECK(flags.insert(f.flag).second);
    for (const char* k : f.keys) CHECK(runtime_keys.insert(k).second);
    CHECK(std::string(f.keys[0]) == f.json_key());
    CHECK(app.get_option_no_throw(f.flag) != nullptr);
    CHECK(std::string(f.default_source).size() > 10);
    REQUIRE(version_values().count(f.id) == 1);
    TrainingSetup s;
    for (const auto& [major, minor] : version_values().at(f.id)) {
      CHECK(std::make_pair(major, minor) != f.get(TrainingSetup{}));
      f.set(s, major, minor);
      CHECK(f.get(s) == std::make_pair(major, minor));
      CHECK(f.text(s) == fmt::format("{}.{}", major, minor));
    }
  }
}

TEST_CASE("version registry: flag -> setup -> estimate JSON -> memplan YAML -> setup, and each key at its line") {
  for (const VersionField& f : version_fields()) {
    for (const auto& v : version_values().at(f.id)) {
      const std::string text = fmt::format("{}.{}", v.first, v.second);
      const std::string shown_path = f.path;
      CAPTURE(shown_path);
      CAPTURE(text);
      std::vector<std::string> args = kBase;
      args.insert(args.end(), {f.flag, text + ".0"});  // a full release ("5.17.0") reads as major.minor
      const json setup = check_round_trip(f, args, v);
      CHECK(setup.at("runtime").at(f.json_key()) == text);
      for (const char* key : f.keys) {
        CAPTURE(key);
        const std::string y = fmt::format("model: llama-3.2-1b\nhardware:\n  gpu: h100-80gb\nruntime:\n  {}: \"{}\"\n", key, text);
        const profiles::BuiltSetup read = build_from_yaml(y);
        CHECK(f.get(read.setup) == v);
        CHECK(read.origin.of(f.id).line == 5);
      }
    }
  }
}

TEST_CASE("version registry: a release that is none is refused at the flag and at the key, with the row's hint") {
  for (const VersionField& f : version_fields()) {
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    std::vector<std::string> bad = {"latest", "2"};
    if (f.max_major > 0) bad.push_back(fmt::format("{}.1", f.max_major + 1));  // torch 10.1 is not a torch
    for (const std::string& v : bad) {
      CAPTURE(v);
      try {
        (void)build_from_flags({"--model", "llama-3.2-1b", f.flag, v});
        FAIL("accepted");
      } catch (const InputError& e) {
        CHECK(e.where().flag == f.flag);
        CHECK(e.message() == fmt::format("the {} version must look like {} (got '{}')", f.library, f.examples, v));
        CHECK(e.hint() == f.hint);
      }
      try {
        (void)build_from_yaml(fmt::format("model: llama-3.2-1b\nruntime:\n  {}: \"{}\"\n", f.keys[0], v));
        FAIL("accepted");
      } catch (const InputError& e) {
        CHECK(e.where().line == 3);
        CHECK(e.message() == fmt::format("{} must look like {} (got '{}')", f.path, f.examples, v));
      }
    }
    if (f.max_major == 0) CHECK(f.get(build_from_flags({"--model", "llama-3.2-1b", f.flag, "10.1"}).setup) == std::make_pair(10, 1));
  }
}

TEST_CASE("version registry: torch 1.x keeps zero_grad's gradients (set_to_none=False) unless the setup says otherwise") {
  const SwitchField& zg = field(Switch::zero_grad_set_to_none);
  CHECK_FALSE(zg.get(build_from_flags({"--model", "gpt2", "--torch-version", "1.13"}).setup));
  CHECK(zg.get(build_from_flags({"--model", "gpt2", "--torch-version", "2.4"}).setup));
  CHECK(zg.get(build_from_flags({"--model", "gpt2", "--torch-version", "1.13", zg.flag}).setup));
  CHECK_FALSE(zg.get(build_from_yaml("model: gpt2\nruntime:\n  torch: \"1.13\"\n").setup));
  CHECK(zg.get(build_from_yaml("model: gpt2\nruntime:\n  zero_grad_set_to_none: true\n  torch_version: \"1.13\"\n").setup));
}

TEST_CASE("version registry: a flag overrides the config's release, each names its source, long values are clipped") {
  const std::string y = "model: gpt2\nruntime:\n  torch: \"1.13\"\n  transformers: \"4.52\"\n";
  const profiles::LoadedConfig cfg = profiles::load_config_text(y, "v.yaml", "v.yaml");
  profiles::SetupInputs in;
  in.config = "v.yaml";
  const profiles::BuiltSetup from_file = profiles::build_setup(in, cfg);
  CHECK(field(Version::torch).text(from_file.setup) == "1.13");
  CHECK_FALSE(from_file.setup.runtime.zero_grad_set_to_none);
  CHECK(from_file.origin.of(Version::torch).line == 3);
  CHECK(from_file.origin.of(Version::transformers).line == 4);
  CHECK(cli::sources_json(from_file).at(path(Version::torch)) == "v.yaml:3:3 (runtime.torch)");
  in.version_flag(Version::torch) = "2.4";
  const profiles::BuiltSetup flagged = profiles::build_setup(in, cfg);
  CHECK(field(Version::torch).text(flagged.setup) == "2.4");
  CHECK(flagged.setup.runtime.zero_grad_set_to_none);  // torch 2's default again
  CHECK(cli::sources_json(flagged).at(path(Version::torch)) == "--torch-version");
  CHECK(field(Version::transformers).text(flagged.setup) == "4.52");  // the other row as the file says
  // A stated zero_grad_set_to_none is kept whatever the release.
  profiles::SetupInputs kept;
  kept.config = "z.yaml";
  kept.version_flag(Version::torch) = "1.13";
  CHECK(profiles::build_setup(kept, profiles::load_config_text("model: gpt2\nruntime:\n  zero_grad_set_to_none: true\n", "z.yaml", "z.yaml"))
            .setup.runtime.zero_grad_set_to_none);

  const std::string long_value(100, '7');
  for (const VersionField& f : version_fields()) {
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    try {
      (void)build_from_flags({"--model", "gpt2", f.flag, long_value});
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.message().find(profiles::clip(long_value)) != std::string::npos);
      CHECK(e.message().find(long_value) == std::string::npos);
    }
    try {
      (void)build_from_yaml(fmt::format("model: gpt2\nruntime:\n  {}: \"{}\"\n", f.keys[1], long_value));
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where().line == 3);
      CHECK(e.message().find(long_value) == std::string::npos);
    }
  }
}

// ---- lists -------------------------------------------------------------------------------------

TEST_CASE("list registry: rows in order, registered on the commands, each with its words and its default's source") {
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  for (size_t i = 0; i < kListCount; ++i) {
    const ListField& f = list_fields()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);  // the paths and flags: "every registry" above
    CHECK(app.get_option_no_throw(f.flag) != nullptr);
    CHECK(std::string(f.default_source).size() > 10);
    CHECK(std::string(f.words).size() > 3);
  }
}

TEST_CASE("list registry: flag -> setup -> estimate JSON -> memplan YAML -> setup, and each key at its line") {
  for (const ListField& f : list_fields()) {
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    for (const std::vector<std::string>& v : {std::vector<std::string>{"q", "k", "v", "o"}, std::vector<std::string>{"all-linear"}}) {
      const json setup = check_round_trip(f,
                                          {"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--seq-len", "256", "--finetune", "lora",
                                           f.flag, fmt::format("{}", fmt::join(v, ","))},
                                          v);
      CHECK(setup.at(f.json_section()).at(f.json_key()) == v);
      // Each key, as a YAML list and as a comma list, under each spelling of its section.
      for (const char* key : f.keys) {
        if (!key) continue;
        CAPTURE(key);
        for (const std::string head : {"finetune:\n  method: lora\n  ", "lora:\n  ", "peft:\n  method: lora\n  "})
          for (const std::string& value : {fmt::format("[{}]", fmt::join(v, ", ")), fmt::format("{}", fmt::join(v, ","))}) {
            const std::string y0 = "model: llama-3.2-1b\n" + head;
            const int line = static_cast<int>(std::count(y0.begin(), y0.end(), '\n')) + 1;
            const std::string y = y0 + fmt::format("{}: {}\n", key, value);
            CAPTURE(y);
            const profiles::BuiltSetup b = build_from_yaml(y);
            CHECK(f.get(b.setup) == v);
            CHECK(b.origin.of(f.id).line == line);
            CHECK(b.setup.finetune.mode == FinetuneMode::lora);  // the targets say adapters are trained
          }
      }
    }
  }
  // Shown with adapters only; an empty list (PEFT's default for the model) is not written.
  const json full = estimate_json({"--model", "llama-3.2-1b"}).at("setup");
  CHECK_FALSE(full.at("finetune").contains("lora_targets"));
  const profiles::BuiltSetup lora = build_from_flags({"--model", "llama-3.2-1b", "--finetune", "lora"});
  CHECK(emitted_yaml(lora.setup).find(field(List::lora_targets).keys[0]) == std::string::npos);
}

// ---- sizes -------------------------------------------------------------------------------------

namespace {
// A size's test value, as a flag writes it and in bytes, and the bytes where its rule lands them.
struct SizeCase {
  Size id;
  const char* text;
  int64_t bytes;
  int64_t (*landed)(const TrainingSetup&);
};
const std::vector<SizeCase>& size_cases() {
  static const std::vector<SizeCase> v = {
      {Size::gpu_memory, "20GiB", int64_t{20} << 30, [](const TrainingSetup& s) { return s.device.capacity_bytes; }},
      {Size::allocator_cap, "11GiB", int64_t{11} << 30, [](const TrainingSetup& s) { return s.device.allocator_cap_bytes; }},
      {Size::host_memory, "512GiB", int64_t{512} << 30, [](const TrainingSetup& s) { return s.parallel.host_memory_bytes; }},
  };
  return v;
}
}  // namespace

TEST_CASE("size registry: rows in order, registered on the commands, each read from its flag and its key at its line, written by a plan and read back") {
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  REQUIRE(size_cases().size() == kSizeCount);
  for (size_t i = 0; i < kSizeCount; ++i) {
    const SizeField& f = size_fields()[i];
    const SizeCase& c = size_cases()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(c.id == f.id);
    CHECK(app.get_option_no_throw(f.flag) != nullptr);
    CHECK(std::string(f.default_source).size() > 10);
    // The flag: the bytes land where its rule puts them, and sources names the flag.
    const std::vector<std::string> args = {"--model", "llama-3.2-1b", "--gpu", "h100-80gb", f.flag, c.text};
    const profiles::BuiltSetup b = build_from_flags(args);
    CHECK(c.landed(b.setup) == c.bytes);
    CHECK(b.origin.of(f.id).flag == f.flag);
    CHECK(estimate_json(args).at("setup").at("sources").at(f.path) == f.flag);
    // Its hardware: key, at its line.
    const std::string y = fmt::format("model: llama-3.2-1b\nhardware:\n  gpu: h100-80gb\n  {}: {}\n", f.key, c.text);
    CAPTURE(y);
    const profiles::BuiltSetup r = build_from_yaml(y);
    CHECK(c.landed(r.setup) == c.bytes);
    CHECK(r.origin.of(f.id).line == 4);
    // The memplan YAML a plan writes states it and reads back to the same setup; the re-check flags of
    // the formats without a hardware: section (planner::target_args) carry it too.
    const std::string yaml = emitted_yaml(b.setup);
    CAPTURE(yaml);
    const profiles::BuiltSetup back = build_from_yaml(yaml);
    CHECK(c.landed(back.setup) == c.bytes);
    CHECK(back.origin.of(f.id).line > 0);
    CHECK(cli::setup_json(back.setup) == cli::setup_json(b.setup));
    planner::EmitContext e;
    e.setup = b.setup;
    e.gpu = "h100-80gb";
    std::vector<std::string> recheck = {"--model", "llama-3.2-1b"};
    for (const std::string& a : planner::target_args(e)) recheck.push_back(a);
    CAPTURE(fmt::format("{}", fmt::join(recheck, " ")));
    CHECK(std::find(recheck.begin(), recheck.end(), std::string(f.flag)) != recheck.end());
    CHECK(c.landed(build_from_flags(recheck).setup) == c.bytes);
    // A bare number is a fraction of the card only where the row says so; elsewhere a size needs its unit.
    if (f.fraction) {
      CHECK(build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", f.flag, "0.5"}).setup.device.allocator_cap_fraction == 0.5);
    } else {
      try {
        (void)build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", f.flag, "12"});
        FAIL("accepted");
      } catch (const InputError& e) {
        CHECK(e.where().flag == f.flag);
        CHECK(e.message().find("has no unit") != std::string::npos);
      }
    }
  }
}

// ---- the model's fields --------------------------------------------------------------------------

TEST_CASE("model registry: one row per ModelSpec field, named as the member, its path the one every layer uses") {
  std::set<std::string> names, paths;
  std::set<size_t> offsets;
  for (const ModelField& f : model_fields()) {
    CAPTURE(f.name);
    CHECK(names.insert(f.name).second);
    CHECK(paths.insert(f.path).second);
    CHECK(offsets.insert(f.offset).second);
    CHECK(&model_field_at(f.offset) == &f);
    CHECK(f.path == (f.name == "experts_per_token" ? std::string("model.num_experts_per_token") : "model." + f.name));
  }
  CHECK(model_fields().size() == 79);  // every member but `quantized` (a checkpoint's quantization, set whole by the readers)
  CHECK(std::string(path(&ModelSpec::hidden_size)) == "model.hidden_size");
  CHECK(std::string(path(&ModelSpec::experts_per_token)) == "model.num_experts_per_token");
  CHECK_THROWS_AS(path(&ModelSpec::quantized), std::logic_error);
}

TEST_CASE("model registry: the setup JSON's model section is the rows marked shown, enums by to_string's word") {
  const json model = estimate_json({"--model", "gpt2"}).at("setup").at("model");
  size_t shown = 0;
  for (const ModelField& f : model_fields()) {
    CAPTURE(f.name);
    CHECK(model.contains(f.name) == f.in_setup_json);
    shown += f.in_setup_json ? 1 : 0;
  }
  CHECK(shown == 15);
  CHECK(model.size() == shown);  // a MoE model adds its derived moe: block
  CHECK(model.at("norm") == "layer-norm");  // families.yaml's word is layer_norm
  CHECK(model.at("activation") == "gelu-new");
  CHECK(model.at("head") == "causal-lm");
  CHECK(model.at("hidden_size") == 768);
  CHECK(model.at("tie_word_embeddings") == true);
  CHECK(estimate_json({"--model", "moe-nano"}).at("setup").at("model").contains("moe"));
}

TEST_CASE("model registry: an inline model's keys, an HF config's keys and validate() name the row's path") {
  // The memplan YAML model: section, each key at its line.
  const std::string text = "model:\n  name: tiny\n  model_type: llama\n  hidden_size: 64\n  num_layers: 2\n  num_attention_heads: 4\n"
                           "  num_experts: 4\n  num_experts_per_tok: 2\n  dropout: 0.1\n";
  const profiles::BuiltSetup b = build_from_yaml(text, "m.yaml");
  CHECK(b.origin.of(path(&ModelSpec::hidden_size)).line == 4);
  CHECK(b.origin.of(path(&ModelSpec::num_layers)).line == 5);
  CHECK(b.origin.of(path(&ModelSpec::experts_per_token)).line == 8);
  CHECK(b.origin.of(path(&ModelSpec::embedding_dropout)).line == 9);
  CHECK(b.setup.model.experts_per_token == 2);
  // validate() names the same path, which the error places at the key's line.
  TrainingSetup bad = b.setup;
  bad.model.experts_per_token = 0;
  bool named = false;
  for (const Problem& p : validate(bad)) named = named || p.field == path(&ModelSpec::experts_per_token);
  CHECK(named);
  try {
    (void)build_from_yaml("model:\n  name: tiny\n  model_type: llama\n  hidden_size: 0\n  num_layers: 2\n  num_attention_heads: 4\n", "m.yaml");
    FAIL("accepted hidden_size 0");
  } catch (const InputError& e) {
    CHECK(e.where().line == 4);
    CHECK(e.message() == "model.hidden_size: must be at least 1 (got 0)");
  }
}

// ---- the target ----------------------------------------------------------------------------------

TEST_CASE("target registry: rows in order, registered on the commands, each flag and the gpu key naming their path") {
  CLI::App app;
  profiles::SetupInputs in;
  cli::add_setup_flags(app, in);
  for (size_t i = 0; i < kTargetCount; ++i) {
    const TargetField& f = target_fields()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(std::string(f.default_source).size() > 10);
    CLI::Option* o = app.get_option_no_throw(f.flag);
    REQUIRE(o != nullptr);
    CHECK(o->get_description() == f.help);
    // The flag lands in the SetupInputs member the row maps to.
    CLI::App one;
    profiles::SetupInputs got;
    cli::add_setup_flags(one, got);
    one.parse(std::string(f.flag) + " x", false);
    CHECK(got.target_flag(f.id) == std::optional<std::string>("x"));
    for (const TargetField& other : target_fields())
      if (other.id != f.id) CHECK_FALSE(got.target_flag(other.id).has_value());
  }
  // --gpu and --device set their paths' provenance; the hardware: key its line.
  const profiles::BuiltSetup g = build_from_flags({"--model", "llama-3.2-1b", field(Target::gpu).flag, "h100-80gb"});
  CHECK(g.setup.device.name == "h100-80gb");
  CHECK(g.origin.of(Target::gpu).flag == field(Target::gpu).flag);
  CHECK(estimate_json({"--model", "llama-3.2-1b", "--gpu", "h100-80gb"}).at("setup").at("sources").at(path(Target::gpu)) == "--gpu");
  const profiles::BuiltSetup d = build_from_flags({"--model", "llama-3.2-1b", field(Target::device).flag, "cpu"});
  CHECK(d.setup.device.kind == DeviceKind::cpu);
  CHECK(d.origin.of(Target::device).flag == field(Target::device).flag);
  const profiles::BuiltSetup y = build_from_yaml(fmt::format("model: llama-3.2-1b\nhardware:\n  {}: a100-40gb\n", field(Target::gpu).key));
  CHECK(y.setup.device.name == "a100-40gb");
  CHECK(y.origin.of(Target::gpu).line == 3);
  // An unknown device is refused at its flag.
  try {
    (void)build_from_flags({"--model", "llama-3.2-1b", field(Target::device).flag, "tpu"});
    FAIL("accepted --device tpu");
  } catch (const InputError& e) {
    CHECK(e.where().flag == field(Target::device).flag);
  }
  // The device kind's key (a plan for the CPU writes it), at its line; a --gpu flag replaces the
  // file's whole target, the kind with it; an unknown kind is refused at the key.
  const profiles::BuiltSetup c = build_from_yaml(fmt::format("model: llama-3.2-1b\nhardware:\n  {}: cpu\n", field(Target::device).key));
  CHECK(c.setup.device.kind == DeviceKind::cpu);
  CHECK(c.setup.device.capacity_bytes == profiles::host_memory_bytes());
  CHECK(c.origin.of(Target::device).line == 3);
  const profiles::BuiltSetup c16 = build_from_yaml("model: llama-3.2-1b\nhardware:\n  device: cpu\n  gpu_memory: 16GiB\n");
  CHECK(c16.setup.device.kind == DeviceKind::cpu);
  CHECK(c16.setup.device.capacity_bytes == int64_t{16} << 30);
  CHECK(c16.origin.of(Size::gpu_memory).line == 4);
  {
    const profiles::LoadedConfig cfg = profiles::load_config_text("model: llama-3.2-1b\nhardware:\n  device: cpu\n", "c.yaml", "c.yaml");
    profiles::SetupInputs in;
    in.config = "c.yaml";
    in.gpu = "h100-80gb";
    CHECK(profiles::build_setup(in, cfg).setup.device.kind == DeviceKind::cuda);
  }
  try {
    (void)build_from_yaml("model: llama-3.2-1b\nhardware:\n  device: tpu\n", "d.yaml");
    FAIL("accepted device: tpu");
  } catch (const InputError& e) {
    CHECK(e.where().line == 3);
    CHECK(e.message() == "unknown device 'tpu'");
  }
}

TEST_CASE("target registry: flag -> setup -> estimate JSON -> memplan YAML -> setup for the card and the device kind; the calibration rides the re-check") {
  // The row's flag -> its source in the estimate JSON -> the memplan YAML a plan writes -> the row
  // noted at its line and the whole setup back.
  auto round_trip = [](Target row, const std::string& value, const std::string& gpu) {
    CAPTURE(field(row).flag);
    const std::vector<std::string> flags = {"--model", "llama-3.2-1b", field(row).flag, value};
    const profiles::BuiltSetup sent = build_from_flags(flags);
    CHECK(estimate_json(flags).at("setup").at("sources").at(path(row)) == field(row).flag);
    const std::string y = emitted_yaml(sent.setup, gpu);
    CAPTURE(y);
    const profiles::BuiltSetup back = build_from_yaml(y);
    CHECK(back.origin.of(row).line > 0);
    CHECK(cli::setup_json(back.setup) == cli::setup_json(sent.setup));
    return back;
  };
  // The card: the hardware: gpu key the plan writes.
  const profiles::BuiltSetup gb = round_trip(Target::gpu, "a100-40gb", "a100-40gb");
  CHECK(gb.setup.device.name == "a100-40gb");
  // The device kind: hardware: device: cpu, with this machine's RAM as the card again.
  const profiles::BuiltSetup db = round_trip(Target::device, "cpu", "");
  CHECK(db.setup.device.kind == DeviceKind::cpu);
  // The calibration: sources names its flag; no file format holds it, so the re-check flags name it.
  const std::string profile = std::string(MEMPLAN_TEST_DATA) + "/profiles/calibration.yaml";  // measured on an rtx-3090
  const std::vector<std::string> cal = {"--model", "llama-3.2-1b", "--gpu", "rtx-3090", field(Target::calibration).flag, profile};
  CHECK(build_from_flags(cal).origin.of(Target::calibration).flag == field(Target::calibration).flag);
  CHECK(estimate_json(cal).at("setup").at("sources").at(path(Target::calibration)) == field(Target::calibration).flag);
  CHECK(estimate_json({"--model", "llama-3.2-1b", "--gpu", "a100-40gb"}).at("setup").at("sources").at(path(Target::calibration)) ==
        "memplan default");
  planner::EmitContext e;
  e.setup = gb.setup;
  e.gpu = "a100-40gb";
  e.calibration = "h100.calibration.yaml";
  const std::vector<std::string> t = planner::target_args(e);
  const auto at = std::find(t.begin(), t.end(), std::string(field(Target::calibration).flag));
  REQUIRE(at != t.end());
  REQUIRE(at + 1 != t.end());
  CHECK(*(at + 1) == "h100.calibration.yaml");
}

// ---- settings: what a file states and no flag does ----------------------------------------------

// Each setting row's member as the estimator reads it, written out here: the rows reach their
// members through their own accessors, so this is what would catch two rows' members swapped.
#define MEMPLAN_MEMBER(id, member) {Setting::id, [](const TrainingSetup& s) { return static_cast<int64_t>(s.member); }}
const std::map<Setting, int64_t (*)(const TrainingSetup&)> kSettingMembers = {
    MEMPLAN_MEMBER(reduce_bucket_elems, parallel.reduce_bucket_elems),
    MEMPLAN_MEMBER(allgather_bucket_elems, parallel.allgather_bucket_elems),
    MEMPLAN_MEMBER(stage3_prefetch_bucket_elems, parallel.stage3_prefetch_bucket_elems),
    MEMPLAN_MEMBER(stage3_max_live_parameters, parallel.stage3_max_live_parameters),
    MEMPLAN_MEMBER(overlap_comm, parallel.overlap_comm),
    MEMPLAN_MEMBER(contiguous_gradients, parallel.contiguous_gradients),
    MEMPLAN_MEMBER(offload_pin_memory, parallel.offload_pin_memory),
    MEMPLAN_MEMBER(half_master, parallel.half_master),
    MEMPLAN_MEMBER(half_optimizer_states, parallel.half_optimizer_states),
    MEMPLAN_MEMBER(ddp_bucket_view, parallel.ddp_bucket_view),
    MEMPLAN_MEMBER(zero_redundancy_optimizer, parallel.zero_redundancy_optimizer),
    MEMPLAN_MEMBER(ddp, parallel.ddp),
    MEMPLAN_MEMBER(fsdp_version, parallel.fsdp_version),
    MEMPLAN_MEMBER(num_workers, data.num_workers),
    MEMPLAN_MEMBER(prefetch_factor, data.prefetch_factor),
    MEMPLAN_MEMBER(pin_memory, data.pin_memory),
    MEMPLAN_MEMBER(every_k, checkpointing.every_k),
    MEMPLAN_MEMBER(train_head, finetune.train_head),
    MEMPLAN_MEMBER(train_embeddings, finetune.train_embeddings),
    MEMPLAN_MEMBER(cuda_context_bytes, device.cuda_context_bytes),
    MEMPLAN_MEMBER(cublas_workspace_bytes, device.cublas_workspace_bytes),
};
#undef MEMPLAN_MEMBER

TEST_CASE("setting registry: rows in order, each reaching its own member, its default within validate()'s bounds") {
  const TrainingSetup defaults;
  for (size_t i = 0; i < kSettingCount; ++i) {
    const SettingField& f = setting_fields()[i];
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    CHECK(static_cast<size_t>(f.id) == i);
    CHECK(std::string(f.default_source).size() > 10);
    // A row read by its section's key table has a key there; one read by handlers or rules none.
    CHECK((f.section == nullptr) == (f.keys[0] == nullptr));
    CHECK((f.kind == SettingKind::whole) == (f.whole != nullptr));
    CHECK((f.kind == SettingKind::yes_no) == (f.yes_no != nullptr));
    CHECK((f.kind == SettingKind::place) == (f.get == nullptr));
    if (f.kind == SettingKind::place) continue;
    // The accessor reaches the member the path names, and no other row's.
    TrainingSetup s;
    if (f.whole) f.whole(s) = 7;
    else f.yes_no(s) = !f.yes_no(s);
    CHECK(f.get(s) != f.get(defaults));
    REQUIRE(kSettingMembers.count(f.id) == 1);
    CHECK(kSettingMembers.at(f.id)(s) == f.get(s));
    for (const SettingField& other : setting_fields())
      if (other.id != f.id && other.get) CHECK(other.get(s) == other.get(defaults));
    if (f.hint) {
      CHECK(f.kind == SettingKind::whole);
      CHECK(f.lo <= f.get(defaults));
      CHECK(f.get(defaults) <= f.hi);
    }
  }
  CHECK(std::string(path(Setting::overlap_comm)) == "parallel.overlap_comm");
  CHECK(std::string(key(Setting::stage3_prefetch_bucket_elems)) == "stage3_prefetch_bucket_size");
  CHECK_THROWS_AS(key(Setting::every_k), std::logic_error);  // read by handlers: no key to write
  CHECK(kSettingMembers.size() == kSettingCount - 2);          // all but the two places
}

TEST_CASE("setting registry: each key of a row's section reads into its member at its line; out of bounds is refused there") {
  const TrainingSetup defaults;
  int keys = 0;
  for (const SettingField& f : setting_fields()) {
    if (!f.section) continue;
    for (const char* k : f.keys) {
      if (!k) continue;
      ++keys;
      CAPTURE(std::string(k));
      // A memplan YAML states the DeepSpeed section in a deepspeed: block, training: and data: at the top.
      const bool ds = std::string(f.section) == "zero_optimization";
      auto text = [&](const std::string& value) {
        return ds ? fmt::format("model: llama-3.2-1b\ndeepspeed:\n  zero_optimization:\n    stage: 2\n    {}: {}\n", k, value)
                  : fmt::format("model: llama-3.2-1b\n{}:\n  {}: {}\n", f.section, k, value);
      };
      const int line = ds ? 5 : 3;
      // A whole number at its upper bound (read as it is), a yes/no the other way from its default.
      const int64_t want = f.whole ? (f.hint ? f.hi : 12345) : 1 - f.get(defaults);
      const profiles::BuiltSetup b = build_from_yaml(text(f.whole ? std::to_string(want) : (want ? "true" : "false")), "s.yaml");
      CHECK(f.get(b.setup) == want);
      CHECK(b.origin.of(f.id).line == line);
      if (ds) {  // the same key in a DeepSpeed JSON's own zero_optimization
        const profiles::LoadedConfig j = profiles::load_config_text(
            fmt::format("{{\n  \"zero_optimization\": {{\n    \"stage\": 2,\n    \"{}\": {}\n  }}\n}}\n", k,
                        f.whole ? std::to_string(want) : (want ? "true" : "false")),
            "ds.json", "ds.json");
        CHECK(j.kind == "deepspeed");
        CHECK(f.get(j.setup) == want);
        CHECK(j.origin.of(f.id).line == 4);
      }
      if (!f.hint) continue;
      try {
        (void)build_from_yaml(text(std::to_string(f.hi + 1)), "s.yaml");
        FAIL("accepted a value above the bound");
      } catch (const InputError& e) {
        CHECK(e.where().line == line);
        CHECK(e.message() == fmt::format("{}: must be between {} and {} (got {})", f.path, f.lo, f.hi, f.hi + 1));
        CHECK(e.hint() == f.hint);
      }
    }
  }
  CHECK(keys == 15);  // training: DDP's bucket view, ZeroRedundancyOptimizer, DDP on one rank, FSDP's version; data: 3; zero_optimization: 6 rows, two with DeepSpeed's short alias
}

TEST_CASE("setting registry: the rows read by handlers are noted at their keys") {
  const std::string text =
      "model: llama-3.2-1b\n"                          // 1
      "training:\n"                                    // 2
      "  global_batch_size: 64\n"                      // 3
      "lora:\n"                                        // 4
      "  method: lora\n"                               // 5
      "  modules_to_save: [embed_tokens, lm_head]\n"  // 6
      "deepspeed:\n"                                   // 7
      "  bf16:\n"                                      // 8
      "    enabled: true\n"                            // 9
      "    bf16_master_weights_and_grads: true\n"      // 10
      "    bf16_optimizer_states: true\n"              // 11
      "  zero_optimization:\n"                         // 12
      "    stage: 2\n"                                 // 13
      "    offload_optimizer:\n"                       // 14
      "      device: cpu\n"                            // 15
      "      pin_memory: true\n"                       // 16
      "memory:\n"                                      // 17
      "  target_utilization: 0.8\n";                   // 18
  const profiles::LoadedConfig cfg = profiles::load_config_text(text, "h.yaml", "h.yaml");
  CHECK(cfg.global_batch == std::optional<int64_t>(64));
  CHECK(cfg.origin.of(Setting::global_batch).line == 3);
  const profiles::BuiltSetup b = build_from_yaml(text, "h.yaml");
  for (const auto& read : {std::pair{Setting::train_embeddings, 6}, {Setting::train_head, 6}, {Setting::half_master, 10},
                            {Setting::half_optimizer_states, 11}, {Setting::offload_pin_memory, 16}}) {
    const Setting id = read.first;
    const int line = read.second;
    const std::string shown_path = path(id);  // not structured bindings: CAPTURE's lambda cannot take them (clang < 16)
    CAPTURE(shown_path);
    CHECK(field(id).get(b.setup) == 1);
    CHECK(b.origin.of(id).line == line);
  }
  CHECK(cfg.origin.of(Setting::thresholds).line == 17);
  // The thresholds' order is one problem, at the memory: section.
  try {
    (void)build_from_yaml("model: llama-3.2-1b\nmemory:\n  target_utilization: 0.99\n  warning_threshold: 0.5\n", "t.yaml");
    FAIL("accepted target above warning");
  } catch (const InputError& e) {
    CHECK(e.message().rfind(std::string(path(Setting::thresholds)) + ": thresholds must satisfy", 0) == 0);
    CHECK(e.where().line == 2);
  }
  // every:K's K, noted where the mode is stated, so its bound is refused at that line.
  const profiles::BuiltSetup e = build_from_yaml("model: llama-3.2-1b\ntraining:\n  gradient_checkpointing: \"every:4\"\n", "e.yaml");
  CHECK(e.setup.checkpointing.every_k == 4);
  CHECK(e.origin.of(Setting::every_k).line == 3);
  try {
    (void)build_from_yaml("model: llama-3.2-1b\npolicy:\n  checkpoint_every: 2000000\n", "e.yaml");
    FAIL("accepted checkpoint_every: 2000000");
  } catch (const InputError& err) {
    CHECK(err.where().line == 3);
    CHECK(err.message() == "checkpointing.every_k: must be between 1 and 1000000 (got 2000000)");
  }
  // DDP's bucket view, read by the Lightning reader.
  const profiles::LoadedConfig l = profiles::load_config_text(
      "trainer:\n  devices: 2\n  strategy:\n    class_path: lightning.pytorch.strategies.DDPStrategy\n    init_args:\n"
      "      gradient_as_bucket_view: true\nmodel:\n  preset: gpt2\n",
      "l.yaml", "l.yaml", "lightning");
  CHECK(l.setup.parallel.ddp_bucket_view);
  CHECK(l.origin.of(Setting::ddp_bucket_view).line == 6);
}

TEST_CASE("setting registry: the memplan YAML a plan writes carries the data: rows that differ from torch's defaults") {
  TrainingSetup s = build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb"}).setup;
  CHECK(emitted_yaml(s).find("\ndata:\n") == std::string::npos);  // all at torch's defaults: no section
  s.data.num_workers = 8;
  s.data.prefetch_factor = 4;
  s.data.pin_memory = true;
  const std::string yaml = emitted_yaml(s);
  CAPTURE(yaml);
  CHECK(yaml.find("\ndata:\n  num_workers: 8\n  prefetch_factor: 4\n  pin_memory: true\n") != std::string::npos);
  const profiles::BuiltSetup back = build_from_yaml(yaml);
  for (const SettingField& f : setting_fields())
    if (f.section && std::string(f.section) == "data") CHECK(f.get(back.setup) == f.get(s));
}

TEST_CASE("setting registry: the memplan YAML a ZeRO plan writes carries its DeepSpeed settings and reads back to the same setup") {
  // Each ZeRO stage and offload, with DeepSpeed's defaults (the short deepspeed: block) and with every
  // zero_optimization row, the offload's pin_memory and the bf16 master state changed (the block is
  // then a DeepSpeed config).
  for (const char* stage : {"1", "2", "3"})
    for (const char* offload : {"none", "optimizer", "optimizer+params"})
      for (const bool changed : {false, true}) {
        if (std::string(offload) == "optimizer+params" && std::string(stage) != "3") continue;  // parameters offload at stage 3
        const std::string shown = fmt::format("stage {} offload {} changed {}", stage, offload, changed);
        CAPTURE(shown);
        TrainingSetup s = build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--gpus", "2", "--zero", stage, "--offload",
                                            offload, "--precision", "mixed-bf16"}).setup;
        if (changed) {
          for (const SettingField& f : setting_fields())
            if (f.section && std::string(f.section) == kZeroSection) {
              if (f.whole) f.whole(s) = 12'345'678;
              else f.yes_no(s) = !f.yes_no(s);
            }
          s.parallel.offload_pin_memory = true;
          s.parallel.half_master = true;  // bf16.bf16_master_weights_and_grads, and its optimizer states
          s.parallel.half_optimizer_states = true;
        }
        const std::string yaml = emitted_yaml(s);
        CAPTURE(yaml);
        CHECK((yaml.find("    zero_optimization:\n") != std::string::npos) == changed);
        const profiles::BuiltSetup back = build_from_yaml(yaml);
        CHECK(back.warnings.empty());
        CHECK(cli::setup_json(back.setup) == cli::setup_json(s));
        for (const SettingField& f : setting_fields())
          if (f.section && std::string(f.section) == kZeroSection) CHECK(f.get(back.setup) == f.get(s));
        if (std::string(offload) != "none") CHECK(back.setup.parallel.offload_pin_memory == s.parallel.offload_pin_memory);
        CHECK(back.setup.parallel.half_master == s.parallel.half_master);
        CHECK(back.setup.parallel.half_optimizer_states == s.parallel.half_optimizer_states);
        CHECK(back.setup.precision == Precision::mixed_bf16);
      }
}

TEST_CASE("setting registry: each setting with a member, changed where it takes effect, reads back from the memplan YAML and the train-config a plan writes") {
  // The setup each row takes effect in, beside the model and card (ZeRO's rows under DeepSpeed, DDP's
  // bucket view with two ranks, modules_to_save under adapters); the card's rows come from its preset.
  using Args = std::vector<std::string>;
  const std::map<Setting, Args> context = {
      {Setting::reduce_bucket_elems, {"--gpus", "2", "--zero", "2"}},
      {Setting::allgather_bucket_elems, {"--gpus", "2", "--zero", "2"}},
      {Setting::stage3_prefetch_bucket_elems, {"--gpus", "2", "--zero", "3"}},
      {Setting::stage3_max_live_parameters, {"--gpus", "2", "--zero", "3"}},
      {Setting::overlap_comm, {"--gpus", "2", "--zero", "3"}},
      {Setting::contiguous_gradients, {"--gpus", "2", "--zero", "2"}},
      {Setting::offload_pin_memory, {"--gpus", "2", "--zero", "2", "--offload", "optimizer"}},
      {Setting::half_master, {"--gpus", "2", "--zero", "2", "--precision", "mixed-bf16"}},
      {Setting::half_optimizer_states, {"--gpus", "2", "--zero", "2", "--precision", "mixed-bf16"}},
      {Setting::ddp_bucket_view, {"--gpus", "2"}},
      {Setting::zero_redundancy_optimizer, {"--gpus", "2"}},
      {Setting::ddp, {}},
      {Setting::fsdp_version, {"--gpus", "2", "--fsdp", "full"}},
      {Setting::num_workers, {}},
      {Setting::prefetch_factor, {"--gpus", "2", "--finetune", "lora"}},
      {Setting::pin_memory, {}},
      {Setting::every_k, {"--checkpointing", "every:2"}},
      {Setting::train_head, {"--finetune", "lora"}},
      {Setting::train_embeddings, {"--finetune", "qlora"}},
      {Setting::cuda_context_bytes, {"--gpus", "2"}},
      {Setting::cublas_workspace_bytes, {}},
  };
  const TrainingSetup defaults;
  int rows = 0;
  for (const SettingField& f : setting_fields()) {
    if (!f.get) continue;  // a place: no member
    ++rows;
    const std::string shown_path = f.path;
    CAPTURE(shown_path);
    REQUIRE(context.count(f.id) == 1);
    Args args = {"--model", "llama-3.2-1b", "--gpu", "h100-80gb"};
    args.insert(args.end(), context.at(f.id).begin(), context.at(f.id).end());
    TrainingSetup s = build_from_flags(args).setup;
    const std::string before = emitted_yaml(s);
    const bool from_card = std::string(f.path).rfind("hardware.", 0) == 0;
    if (from_card) {
      CHECK(f.get(s) != f.get(defaults));  // the card's preset set it
    } else {
      if (f.whole) f.whole(s) = std::min(f.hi, f.get(s) + 3);  // within the row's bounds
      else f.yes_no(s) = !f.yes_no(s);
      if (f.id == Setting::half_optimizer_states) s.parallel.half_master = true;  // in effect only beside it
    }
    // The memplan YAML and the train-config, both read by memplan's reader.
    for (const planner::EmitFormat format : {planner::EmitFormat::memplan, planner::EmitFormat::train_config}) {
      const std::string yaml = emitted(s, format);
      CAPTURE(yaml);
      if (!from_card && format == planner::EmitFormat::memplan) CHECK(yaml != before);  // the writer states the change
      const profiles::BuiltSetup back = build_from_yaml(yaml);
      CHECK(back.warnings.empty());
      CHECK(f.get(back.setup) == f.get(s));
      if (!from_card) CHECK(back.origin.of(f.id).line > 0);  // noted where the file states it
      for (const SettingField& g : setting_fields())  // no other row moved
        if (g.get) CHECK(g.get(back.setup) == g.get(s));
      CHECK(cli::setup_json(back.setup) == cli::setup_json(s));
    }
  }
  CHECK(rows == static_cast<int>(context.size()));
}

TEST_CASE("setting registry: DDP's bucket view is stated by the files that can say it; a plan for a tool that cannot is made without it") {
  TrainingSetup s = build_from_flags({"--model", "llama-3.2-1b", "--gpu", "h100-80gb", "--gpus", "2"}).setup;
  s.parallel.ddp_bucket_view = true;
  // Lightning: DDPStrategy's init_args (the reader takes it back there), not the plain "ddp" that runs
  // torch's default.
  const std::string lightning = emitted(s, planner::EmitFormat::lightning);
  CAPTURE(lightning);
  CHECK(lightning.find("  strategy:\n    class_path: lightning.pytorch.strategies.DDPStrategy\n    init_args:\n"
                       "      gradient_as_bucket_view: true\n") != std::string::npos);
  s.parallel.ddp_bucket_view = false;
  CHECK(emitted(s, planner::EmitFormat::lightning).find("  strategy: ddp\n") != std::string::npos);
  // A memplan file reads its key in training:, at the top level and under policy: alike.
  for (const char* text : {"model: llama-3.2-1b\ngradient_as_bucket_view: true\n", "model: llama-3.2-1b\npolicy:\n  gradient_as_bucket_view: true\n"})
    CHECK(build_from_yaml(text).setup.parallel.ddp_bucket_view);
  // HF TrainingArguments, Axolotl, LLaMA-Factory and accelerate have no key for it: the plan's setup
  // leaves it off, with a warning at the config's line; memplan's own file keeps it.
  const fs::path dir = fs::temp_directory_path() / fmt::format("memplan-bucket-view-{}", ::getpid());
  fs::create_directories(dir);
  const std::string file = (dir / "bv.yaml").string();
  {
    std::ofstream out(file);
    out << "model: llama-3.2-1b\nhardware:\n  gpu: h100-80gb\n  num_gpus: 2\ntraining:\n  gradient_as_bucket_view: true\n";
  }
  for (const char* emit : {"hf", "axolotl", "llamafactory", "accelerate", "memplan", "train-config", "lightning"}) {
    CAPTURE(std::string(emit));
    profiles::SetupInputs in;
    in.config = file;
    planner::PlanAsk ask;
    ask.emit = emit;
    ask.global_batch = 64;
    std::vector<Warning> seen;
    const auto rp = planner::resolve_plan(in, ask, "", [&](const std::vector<Warning>& w) { seen = w; });
    const bool kept = std::string(emit) == "memplan" || std::string(emit) == "train-config" || std::string(emit) == "lightning";
    CHECK(rp->base().parallel.ddp_bucket_view == kept);
    const auto warned = std::find_if(seen.begin(), seen.end(), [](const Warning& w) {
      return w.message.find("has no gradient_as_bucket_view") != std::string::npos;
    });
    CHECK((warned != seen.end()) == !kept);
    if (warned != seen.end()) CHECK(warned->where.line == 6);
  }
  fs::remove_all(dir);
}
