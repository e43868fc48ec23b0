// torchtitan job configs (`--job.config_file FILE.toml`), read as torchtitan v0.2.2 reads them:
// every absent key takes the JobConfig dataclass default (torchtitan/config/job_config.py @ v0.2.2),
// and the older layout (training.batch_size, parallel degrees under [training] / [experimental],
// [training] compile, [float8]) of the pre-v0.1.0 configs is read too. TOML is the last format
// torchtitan read before its Python configs (commit 9810191bb, 2026-02-23). The GPU count is the
// launcher's (NGPU / torchrun) unless every parallel degree is given.
#include <fmt/format.h>

#include <numeric>

#include "profiles/formats/tool_models.h"

namespace memplan::profiles::detail {
namespace {

constexpr const char* kJob = "torchtitan/config/job_config.py @ v0.2.2";

// The flavors (torchtitan/models/<name>/__init__.py @ v0.2.2, `<name>_args`), keyed "name/flavor".
// Rows without a preset give the flavor's dimensions as an HF config of the same architecture.
const std::vector<ToolModel>& flavors() {
  static const std::vector<ToolModel> f = {
      // llama3_args: dim 256, 6 layers, 16 heads, FFN int(2*4*256/3) rounded up to 256 = 768, vocab 2048.
      {"llama3/debugmodel", "", "",
       "{\"model_type\": \"llama\", \"hidden_size\": 256, \"num_hidden_layers\": 6, \"num_attention_heads\": 16, "
       "\"num_key_value_heads\": 16, \"intermediate_size\": 768, \"vocab_size\": 2048, \"max_position_embeddings\": 131072, "
       "\"hidden_act\": \"silu\", \"tie_word_embeddings\": false}"},
      {"llama3/8B", "meta-llama/Llama-3.1-8B", "llama-3.1-8b", ""},
      {"llama3/70B", "meta-llama/Llama-3.1-70B", "llama-3.1-70b", ""},
      {"llama3/405B", "meta-llama/Llama-3.1-405B", "llama-3.1-405b", ""},
      // llama4_args: MoE layers' expert width int(2*4*dim/3)*1.2/(top_k 1 + 1 shared) rounded up to
      // 2048 = 8192; Scout every layer MoE, Maverick every second with a dense FFN of 16384.
      {"llama4/17bx16e", "meta-llama/Llama-4-Scout-17B-16E", "",
       "{\"model_type\": \"llama4_text\", \"hidden_size\": 5120, \"num_hidden_layers\": 48, \"num_attention_heads\": 40, "
       "\"num_key_value_heads\": 8, \"head_dim\": 128, \"intermediate_size\": 8192, \"intermediate_size_mlp\": 16384, "
       "\"num_local_experts\": 16, \"num_experts_per_tok\": 1, \"interleave_moe_layer_step\": 1, \"vocab_size\": 202048, "
       "\"use_qk_norm\": false, \"tie_word_embeddings\": false}"},
      {"llama4/17bx128e", "meta-llama/Llama-4-Maverick-17B-128E", "",
       "{\"model_type\": \"llama4_text\", \"hidden_size\": 5120, \"num_hidden_layers\": 48, \"num_attention_heads\": 40, "
       "\"num_key_value_heads\": 8, \"head_dim\": 128, \"intermediate_size\": 8192, \"intermediate_size_mlp\": 16384, "
       "\"num_local_experts\": 128, \"num_experts_per_tok\": 1, \"interleave_moe_layer_step\": 2, \"vocab_size\": 202048, "
       "\"use_qk_norm\": false, \"tie_word_embeddings\": false}"},
      // deepseekv3_args: 16B has DeepSeek-V2-Lite's dimensions, 236B DeepSeek-V2's (MLA, MoE).
      {"deepseek_v3/16B", "deepseek-ai/DeepSeek-V2-Lite", "",
       "{\"model_type\": \"deepseek_v2\", \"hidden_size\": 2048, \"num_hidden_layers\": 27, \"num_attention_heads\": 16, "
       "\"num_key_value_heads\": 16, \"intermediate_size\": 10944, \"moe_intermediate_size\": 1408, \"n_routed_experts\": 64, "
       "\"n_shared_experts\": 2, \"num_experts_per_tok\": 6, \"first_k_dense_replace\": 1, \"q_lora_rank\": null, "
       "\"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64, \"qk_nope_head_dim\": 128, \"v_head_dim\": 128, "
       "\"vocab_size\": 102400, \"tie_word_embeddings\": false}"},
      {"deepseek_v3/236B", "deepseek-ai/DeepSeek-V2", "",
       "{\"model_type\": \"deepseek_v2\", \"hidden_size\": 5120, \"num_hidden_layers\": 60, \"num_attention_heads\": 128, "
       "\"num_key_value_heads\": 128, \"intermediate_size\": 12288, \"moe_intermediate_size\": 1536, \"n_routed_experts\": 160, "
       "\"n_shared_experts\": 2, \"num_experts_per_tok\": 6, \"first_k_dense_replace\": 1, \"q_lora_rank\": 1536, "
       "\"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64, \"qk_nope_head_dim\": 128, \"v_head_dim\": 128, "
       "\"vocab_size\": 102400, \"tie_word_embeddings\": false}"},
      {"deepseek_v3/671B", "deepseek-ai/DeepSeek-V3", "deepseek-v3", ""},
      {"qwen3/0.6B", "Qwen/Qwen3-0.6B", "qwen3-0.6b", ""},
      {"qwen3/1.7B", "Qwen/Qwen3-1.7B", "qwen3-1.7b", ""},
      {"qwen3/4B", "Qwen/Qwen3-4B", "qwen3-4b", ""},
      {"qwen3/8B", "Qwen/Qwen3-8B", "qwen3-8b", ""},
      {"qwen3/14B", "Qwen/Qwen3-14B", "qwen3-14b", ""},
      {"qwen3/32B", "Qwen/Qwen3-32B", "qwen3-32b", ""},
      {"qwen3/30B-A3B", "Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b", ""},
      {"qwen3/235B-A22B", "Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b", ""},
  };
  return f;
}

// A flavor name with a variant suffix builds the same dimensions ("8B_flex", "17bx16e_irope").
std::string base_flavor(const std::string& flavor) {
  for (const char* tail : {"_flex_attn", "_varlen_attn", "_flex", "_varlen", "_irope"}) {
    if (ends_with(flavor, tail)) return flavor.substr(0, flavor.size() - std::string(tail).size());
  }
  return flavor;
}

struct Tt {
  explicit Tt(ReadState& state) : st(state) {}
  ReadState& st;
  const Node* name = nullptr;
  const Node* flavor = nullptr;
  // Degrees: -1 = "the rest of the world" (data_parallel_shard_degree's default).
  int64_t replicate = 1, shard = -1, tp = 1, pp = 1, cp = 1, ep = 1, etp = 1;
  const Node *replicate_node = nullptr, *shard_node = nullptr, *tp_node = nullptr, *pp_node = nullptr, *cp_node = nullptr,
             *ep_node = nullptr, *etp_node = nullptr;
  const Node* degree_node = nullptr;  // the first degree given: where the GPU count comes from
  std::string reshard = "default";
  const Node* reshard_node = nullptr;
  std::string dtype = "float32", param = "bfloat16";
  const Node* dtype_node = nullptr;
  const Node* param_node = nullptr;
  int64_t local_batch = 8, global_batch = -1, pp_microbatch = 1;
  const Node* local_node = nullptr;
  const Node* global_node = nullptr;
  const Node* pp_micro_node = nullptr;
  std::string ac_mode = "selective", ac_option = "2";
  const Node* ac_mode_node = nullptr;
  const Node* ac_option_node = nullptr;
  std::vector<std::string> converters;
  const Node* converters_node = nullptr;
  const Node* cpu_offload = nullptr;
  const Node* components_node = nullptr;  // [compile] components
  bool components_loss = true;
  const Node* old_compile = nullptr;      // [training] compile (before 08b8b244f: the loss was not compiled)

  TrainingSetup& s() { return st.s(); }
};
using Table = KeyTable<Tt>;

void degree(const Node& n, Tt& t, int64_t Tt::*slot, const Node* Tt::*node) {
  const int64_t v = as_int(n);
  if (v == 0 || v < -1) type_error(n, "a positive integer (or -1 for the rest)");
  if (v == -1 && slot != &Tt::shard) type_error(n, "a positive integer");
  if (v != -1) as_count(n);  // bounded: the degrees multiply into the GPU count
  t.*slot = v;
  t.*node = &n;
  if (!t.degree_node) t.degree_node = &n;
}
Key<Tt> degree_key(const char* name, int64_t Tt::*slot, const Node* Tt::*node) {
  return {{name}, [slot, node](const Node& n, Tt& t) { degree(n, t, slot, node); }};
}

void set_converters(const Node& n, Tt& t) {
  t.converters = as_text_list(n);
  t.converters_node = &n;
}

const Table& model_keys() {
  static const Table k = {
      {{"name"}, [](const Node& n, Tt& t) { t.name = &n; }},
      {{"flavor"}, [](const Node& n, Tt& t) { t.flavor = &n; }},
      {{"converters"}, set_converters},
      {{"hf_assets_path", "tokenizer_path", "norm_type", "print_after_conversion"}, [](const Node&, Tt&) {}},
  };
  return k;
}

const Table& parallel_keys() {  // [parallelism], and the old [training] / [experimental] degrees
  static const Table k = {
      degree_key("data_parallel_replicate_degree", &Tt::replicate, &Tt::replicate_node),
      degree_key("data_parallel_shard_degree", &Tt::shard, &Tt::shard_node),
      degree_key("tensor_parallel_degree", &Tt::tp, &Tt::tp_node),
      degree_key("pipeline_parallel_degree", &Tt::pp, &Tt::pp_node),
      degree_key("context_parallel_degree", &Tt::cp, &Tt::cp_node),
      degree_key("expert_parallel_degree", &Tt::ep, &Tt::ep_node),
      degree_key("expert_tensor_parallel_degree", &Tt::etp, &Tt::etp_node),
      {{"fsdp_reshard_after_forward"}, [](const Node& n, Tt& t) {
         t.reshard = lower(as_text(n));
         if (t.reshard != "default" && t.reshard != "always" && t.reshard != "never")
           throw InputError(n.where, fmt::format("unknown fsdp_reshard_after_forward '{}'", as_text(n)),
                            "expected one of: default, always, never");
         t.reshard_node = &n;
       }},
      {{"pipeline_parallel_microbatch_size"}, [](const Node& n, Tt& t) {
         t.pp_microbatch = as_count(n);
         t.pp_micro_node = &n;
       }},
      {{"pipeline_parallel_schedule"}, [](const Node& n, Tt& t) {
         const std::string s = as_text(n);
         if (s != "1F1B")
           t.st.unmodelled(n, "the pipeline schedule's in-flight micro-batches are not modelled (memplan holds one "
                              "micro-batch of activations per stage)");
       }},
      {{"pipeline_parallel_layers_per_stage", "module_fqns_per_model_part", "pipeline_parallel_first_stage_less_layers",
        "pipeline_parallel_last_stage_less_layers"},
       [](const Node& n, Tt& t) {
         t.st.unmodelled(n, "an uneven pipeline split is not modelled: memplan gives each stage ceil(layers / stages) layers");
       }},
      {{"disable_loss_parallel", "enable_async_tensor_parallel", "enable_compiled_autograd", "pipeline_parallel_split_points"},
       [](const Node&, Tt&) {}},
  };
  return k;
}

const Table& training_keys() {
  static const Table k = {
      {{"local_batch_size", "batch_size"}, [](const Node& n, Tt& t) {  // batch_size: before 8570415c3 (v0.1.0)
         t.local_batch = as_count(n);
         t.local_node = &n;
       }},
      {{"global_batch_size"}, [](const Node& n, Tt& t) {
         t.global_batch = as_int(n);  // negative: local_batch_size x data-parallel ranks (train.py @ v0.2.2)
         if (t.global_batch >= 0) as_count(n);
         t.global_node = &n;
       }},
      {{"seq_len"}, [](const Node& n, Tt& t) { t.st.set(memplan::path(Count::seq_len), t.s().batch.seq_len, as_count(n), n); }},
      {{"dtype"}, [](const Node& n, Tt& t) {
         t.dtype = lower(as_text(n));
         t.dtype_node = &n;
       }},
      {{"mixed_precision_param"}, [](const Node& n, Tt& t) {
         t.param = lower(as_text(n));
         t.param_node = &n;
       }},
      {{"enable_cpu_offload"}, [](const Node& n, Tt& t) {
         if (as_bool(n)) t.cpu_offload = &n;
       }},
      {{"compile"}, [](const Node& n, Tt& t) {  // before 08b8b244f: [training] compile = true
         t.st.set(Switch::compile, as_bool(n), n);
         t.old_compile = &n;
       }},
      {{"data_parallel_replicate_degree"}, [](const Node& n, Tt& t) { degree(n, t, &Tt::replicate, &Tt::replicate_node); }},
      {{"data_parallel_shard_degree"}, [](const Node& n, Tt& t) { degree(n, t, &Tt::shard, &Tt::shard_node); }},
      {{"tensor_parallel_degree"}, [](const Node& n, Tt& t) { degree(n, t, &Tt::tp, &Tt::tp_node); }},
      {{"mixed_precision_reduce"}, [](const Node& n, Tt& t) {
         if (lower(as_text(n)) != "float32")
           t.st.unmodelled(n, "gradients reduce-scattered in 16 bits are estimated as fp32 gradient shards (an over-estimate)");
       }},
      {{"max_norm", "steps", "dataset", "dataset_path", "gc_freq", "gc_debug", "seed",
        "deterministic", "warmup_steps", "dataloader"},
       [](const Node&, Tt&) {}},
  };
  return k;
}

const Table& checkpoint_keys() {  // [activation_checkpoint]
  static const Table k = {
      {{"mode"}, [](const Node& n, Tt& t) {
         t.ac_mode = lower(as_text(n));
         t.ac_mode_node = &n;
       }},
      {{"selective_ac_option"}, [](const Node& n, Tt& t) {
         t.ac_option = lower(as_text(n));
         t.ac_option_node = &n;
       }},
      {{"per_op_sac_force_recompute_mm_shapes_by_fqns", "early_stop", "memory_budget", "visualize_memory_budget_pareto",
        "preserve_rng_state", "determinism_check", "debug"},
       [](const Node&, Tt&) {}},
  };
  return k;
}

const Table& compile_keys() {
  static const Table k = {
      {{"enable"}, [](const Node& n, Tt& t) { t.st.set(Switch::compile, as_bool(n), n); }},
      // Which parts compile.enable compiles (torchtitan/config/job_config.py Compile.components,
      // default ["model", "loss"]): the loss only when "loss" is listed. The framework default
      // (runtime.compile_loss = runtime.compile) covers a section without it.
      {{"components"}, [](const Node& n, Tt& t) {
         t.components_loss = false;
         for (const Node& item : n.kind == Node::Kind::list ? n.items : std::vector<Node>{n}) {
           const std::string c = as_text(item);
           if (c != "model" && c != "loss")
             throw InputError(item.where, fmt::format("unknown compile component '{}'", c),
                              "expected some of: model, loss (torchtitan/config/job_config.py Compile.components)");
           t.components_loss = t.components_loss || c == "loss";
         }
         t.components_node = &n;
       }},
      {{"backend"}, [](const Node&, Tt&) {}},
  };
  return k;
}

const Table& optimizer_keys() {
  static const Table k = {
      {{"name"}, [](const Node& n, Tt& t) {
         // torchtitan builds Adam or AdamW only (optimizer_classes, torchtitan/components/optimizer.py @ v0.2.2).
         const std::string v = as_text(n);
         if (v == "AdamW") t.st.set(memplan::path(Choice::optimizer), t.s().optimizer, OptimizerKind::adamw, n);
         else if (v == "Adam") t.st.set(memplan::path(Choice::optimizer), t.s().optimizer, OptimizerKind::adam, n);
         else
           throw InputError(n.where, fmt::format("unknown optimizer.name '{}'", v),
                            "torchtitan builds Adam or AdamW (torchtitan/components/optimizer.py @ v0.2.2)");
       }},
      {{"implementation"}, [](const Node& n, Tt& t) {
         t.st.set(memplan::path(Choice::optimizer_impl), t.s().runtime.optimizer_impl,
                  as_choice<OptimizerImpl>(n, "optimizer implementation", parse_optimizer_impl, {"for-loop", "foreach", "fused"}), n);
       }},
      {{"early_step_in_backward"}, [](const Node& n, Tt& t) {
         t.st.set(Switch::optimizer_in_backward, as_bool(n), n);
       }},
      {{"lr", "eps", "weight_decay", "beta1", "beta2"}, [](const Node&, Tt&) {}},
  };
  return k;
}

const Table& float8_keys() {  // [float8] before 5b5d46856 (2025-09-26)
  static const Table k = {
      {{"enable_float8_linear"}, [](const Node& n, Tt& t) {
         if (as_bool(n)) t.st.set(Switch::fp8, true, n);
       }},
      {{"force_recompute_fp8_weight_in_bwd"}, [](const Node& n, Tt& t) {
         t.st.set(Switch::fp8_recompute_weight, as_bool(n), n);
       }},
      {{"enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp", "filter_fqns", "recipe_name", "emulate"},
       [](const Node&, Tt&) {}},
  };
  return k;
}

const Table& experimental_keys() {
  static const Table k = {
      degree_key("pipeline_parallel_degree", &Tt::pp, &Tt::pp_node),
      degree_key("context_parallel_degree", &Tt::cp, &Tt::cp_node),
      {{"custom_import", "custom_model_path", "custom_args_module"}, [](const Node& n, Tt& t) {
         if (!as_text(n).empty())
           t.st.unmodelled(n, "user code may change the model or the config; the estimate uses the named flavor as torchtitan "
                              "defines it");
       }},
      {{"pipeline_parallel_split_points", "pipeline_parallel_schedule", "pipeline_parallel_microbatches",
        "enable_async_tensor_parallel", "enable_compiled_autograd"},
       [](const Node&, Tt&) {}},
  };
  return k;
}

Key<Tt> section(const char* name, const Table& (*table)()) {
  return {{name}, [table](const Node& n, Tt& t) { read_section(n, {&table()}, t, &t.st.out.warnings); }};
}

const Table& root_keys() {
  static const Table k = {
      section("model", model_keys),
      section("training", training_keys),
      section("parallelism", parallel_keys),
      section("activation_checkpoint", checkpoint_keys),
      section("compile", compile_keys),
      section("optimizer", optimizer_keys),
      section("float8", float8_keys),
      section("experimental", experimental_keys),
      // [quantize.linear.float8] (after 5b5d46856): the one key that changes memory; the
      // converters in [model] decide whether float8 runs at all (resolve_converters).
      {{"quantize"}, [](const Node& n, Tt& t) {
         const Node* lin = n.kind == Node::Kind::map ? n.find("linear") : nullptr;
         const Node* f8 = lin && lin->kind == Node::Kind::map ? lin->find("float8") : nullptr;
         if (const Node* r = f8 && f8->kind == Node::Kind::map ? f8->find("force_recompute_fp8_weight_in_bwd") : nullptr)
           t.st.set(Switch::fp8_recompute_weight, as_bool(*r), *r);
       }},
      {{"job", "profiling", "metrics", "lr_scheduler", "checkpoint", "validation", "comm", "fault_tolerance",
        "memory_estimation", "debug", "mx", "dataloader"},
       [](const Node&, Tt&) {}},
  };
  return k;
}

void resolve_model(Tt& t) {
  const std::string name = t.name ? as_text(*t.name) : "llama3";        // Model.name default
  const std::string flavor = t.flavor ? as_text(*t.flavor) : "debugmodel";  // Model.flavor default
  const Node* at = t.flavor ? t.flavor : t.name;
  const std::string key = name + "/" + base_flavor(flavor);
  const Where where = at ? at->where : Where::at_file(t.st.path);
  const ToolModel& row = find_tool_model(flavors(), key, "torchtitan model", where,
                                         "torchtitan v0.2.2 defines the flavors in torchtitan/models/<name>/__init__.py");
  ModelSpec m = tool_model_spec(row);
  // torchtitan's MoE routes each token to its experts (grouped GEMMs over the routed tokens,
  // torchtitan/models/moe/moe.py @ v0.2.2), never every expert over every token.
  if (m.num_experts > 0) m.moe_impl = MoeImpl::loop;
  m.name = key;
  if (at) {
    use_tool_model(t.st, m, *at);
  } else {
    t.st.s().model = m;
    t.st.out.has_model = true;
    t.st.by_default(memplan::path(&ModelSpec::hidden_size), fmt::format("default of torchtitan's JobConfig: [model] name = \"llama3\", flavor = \"debugmodel\" ({})", kJob));
  }
}

// FSDP shards over data_parallel_shard_degree x context_parallel_degree ranks (ParallelDims,
// torchtitan/distributed/parallel_dims.py @ v0.2.2); -1 takes the rest of the world.
void resolve_parallel(Tt& t) {
  TrainingSetup& s = t.s();
  Parallelism& p = s.parallel;
  // The loss compiles with the model when [compile] lists it; the older [training] compile left
  // torch.compile(loss_fn) commented out (torchtitan train.py @ 9dec370a L136-138).
  if (t.components_node)
    t.st.set(Switch::compile_loss, s.runtime.compile && t.components_loss, *t.components_node);
  else if (t.old_compile)
    t.st.set(Switch::compile_loss, false, *t.old_compile);
  if (t.tp_node) t.st.set(memplan::path(Count::tensor_parallel), p.tensor_parallel, t.tp, *t.tp_node);
  if (t.pp_node) t.st.set(memplan::path(Count::pipeline_parallel), p.pipeline_parallel, t.pp, *t.pp_node);
  if (t.ep_node) t.st.set(memplan::path(Count::expert_parallel), p.expert_parallel, t.ep, *t.ep_node);
  // ParallelDims' world size: dp_replicate x dp_shard x cp x tp x pp.
  const Where at_file = Where::at_file(t.st.path);
  const char* world = "data_parallel_replicate x shard x context x tensor x pipeline degrees (the GPU count)";
  if (t.shard > 0) {
    p.num_gpus = count_product({{t.replicate, t.replicate_node}, {t.shard, t.shard_node}, {t.cp, t.cp_node}, {t.tp, t.tp_node},
                                {t.pp, t.pp_node}},
                               kMaxGpus, world, at_file);
    if (t.degree_node) t.st.note(memplan::path(Count::num_gpus), *t.degree_node);
  } else {
    // shard -1: the world is the launcher's; the file gives the other degrees' product, and the
    // expert-parallel groups must fit in it (ParallelDims._validate: EP divides dp_shard x cp x tp),
    // so the smallest world is a multiple of both.
    const int64_t product = count_product({{t.replicate, t.replicate_node}, {t.cp, t.cp_node}, {t.tp, t.tp_node}, {t.pp, t.pp_node}},
                                          kMaxGpus, world, at_file);
    const int64_t others = t.ep > 1 ? count_product({{product, nullptr}, {t.ep / std::gcd(product, t.ep), t.ep_node}}, kMaxGpus, world, at_file)
                                    : product;
    const Where w = t.shard_node ? t.shard_node->where : at_file;
    t.st.defer(memplan::path(Count::num_gpus), w,
               fmt::format("the GPU count is not in this torchtitan config (data_parallel_shard_degree = -1 takes what the "
                           "launcher starts: NGPU / torchrun --nproc_per_node); estimating {} GPU(s), sharded with FSDP",
                           others),
               fmt::format("pass --gpus N (a multiple of {})", others));
    p.num_gpus = others;
  }
  const bool fsdp = t.shard != 1 || t.cp > 1;  // -1: the rest, assumed more than one rank
  const bool ddp = !fsdp && t.replicate > 1;
  if (t.cp > 1)
    t.st.unmodelled(*t.cp_node, "context parallelism is not modelled: the estimate holds the activations of the whole "
                                    "sequence on each rank (an over-estimate)");
  if (t.etp_node && t.etp != t.tp && t.st.s().model.num_experts > 0 && t.tp > 1)
    t.st.unmodelled(*t.etp_node, fmt::format("memplan shards the experts' width over tensor_parallel_degree ({}), not over "
                                             "{} ranks", t.tp, t.etp));
  if (fsdp) {
    if (t.replicate > 1 && t.shard > 1) {
      // HSDP: shards within each group of shard x cp ranks, replicated across groups.
      t.st.set(memplan::path(Choice::fsdp), p.fsdp, FsdpMode::hybrid_shard, *t.shard_node);
      t.st.set(memplan::path(Count::gpus_per_node), p.gpus_per_node, t.shard * t.cp, *t.shard_node);
    } else if (t.replicate > 1) {
      t.st.unmodelled(*t.replicate_node, "HSDP with data_parallel_shard_degree = -1: the estimate shards over every "
                                      "data-parallel rank (an under-estimate of the sharded states)");
    }
    const bool keep = t.reshard == "never" || (t.reshard == "default" && t.pp > 1);
    if (keep && p.fsdp != FsdpMode::hybrid_shard) {
      // default: reshard after forward unless pipeline parallel (apply_fsdp, torchtitan/models/llama3/infra/parallelize.py).
      if (t.reshard_node) t.st.set(memplan::path(Choice::fsdp), p.fsdp, FsdpMode::shard_grad_op, *t.reshard_node);
      else {
        p.fsdp = FsdpMode::shard_grad_op;
        t.st.by_default(memplan::path(Choice::fsdp), "default of torchtitan's JobConfig: fsdp_reshard_after_forward = \"default\" keeps the gathered "
                                         "parameters with pipeline parallelism (apply_fsdp, torchtitan/models/llama3/infra/"
                                         "parallelize.py @ v0.2.2)");
      }
    }
  } else {
    p.fsdp = FsdpMode::none;
    t.st.by_default(memplan::path(Choice::fsdp), "data_parallel_shard_degree = 1 and no context parallelism: no FSDP "
                                     "(torchtitan/models/llama3/infra/parallelize.py @ v0.2.2)");
  }
  if (t.cpu_offload) {
    t.st.set(memplan::path(Choice::offload), p.offload, Offload::optimizer_and_params, *t.cpu_offload);
    if (p.fsdp == FsdpMode::none) t.st.set(memplan::path(Choice::fsdp), p.fsdp, FsdpMode::full_shard, *t.cpu_offload);
  }

  // Precision (maybe_enable_amp, torchtitan/distributed/utils.py; MixedPrecisionPolicy in apply_fsdp @ v0.2.2):
  // training.dtype bfloat16 is pure bf16; else FSDP keeps fp32 shards and computes in
  // mixed_precision_param; DDP and one GPU autocast to it; TP or PP without FSDP train in fp32.
  const Node* pnode = t.dtype_node ? t.dtype_node : t.param_node;
  auto set_precision = [&](Precision v, const char* why) {
    if (pnode) t.st.set(memplan::path(Choice::precision), s.precision, v, *pnode);
    else {
      s.precision = v;
      t.st.by_default(memplan::path(Choice::precision), fmt::format("defaults of torchtitan's JobConfig: training.dtype = \"float32\", mixed_precision_param = "
                                               "\"bfloat16\" ({}); {}", kJob, why));
    }
  };
  if (t.dtype == "bfloat16") return set_precision(Precision::bf16, "full bf16");
  if (t.dtype != "float32")
    throw InputError(t.dtype_node->where, fmt::format("unknown training.dtype '{}'", t.dtype), "expected one of: float32, bfloat16");
  if (t.param == "float32") return set_precision(Precision::fp32, "no mixed precision");
  if (t.param != "bfloat16")
    throw InputError(t.param_node->where, fmt::format("unknown training.mixed_precision_param '{}'", t.param),
                     "expected one of: bfloat16, float32");
  if (fsdp) return set_precision(Precision::mixed_bf16, "FSDP: fp32 shards, bf16 compute, fp32 reduce");
  if (t.tp > 1 || t.pp > 1) return set_precision(Precision::fp32, "tensor/pipeline parallel without FSDP: mixed precision off");
  return set_precision(Precision::amp_bf16, ddp ? "DDP: torch.autocast(bf16)" : "one GPU: torch.autocast(bf16)");
}

void resolve_batch(Tt& t) {
  TrainingSetup& s = t.s();
  if (t.local_node) t.st.set(memplan::path(Count::micro_batch), s.batch.micro_batch, t.local_batch, *t.local_node);
  else {
    s.batch.micro_batch = t.local_batch;
    t.st.by_default(memplan::path(Count::micro_batch), fmt::format("default of torchtitan's JobConfig: training.local_batch_size = 8 ({})", kJob));
  }
  if (!t.st.out.origin.fields.count(memplan::path(Count::seq_len))) {
    s.batch.seq_len = 2048;
    t.st.by_default(memplan::path(Count::seq_len), fmt::format("default of torchtitan's JobConfig: training.seq_len = 2048 ({})", kJob));
  }
  // With pipeline parallelism each stage runs micro-batches of pipeline_parallel_microbatch_size.
  int64_t micro = t.local_batch;
  if (t.pp > 1) {
    micro = t.pp_microbatch;
    if (t.pp_micro_node) t.st.set(memplan::path(Count::micro_batch), s.batch.micro_batch, micro, *t.pp_micro_node);
    else {
      s.batch.micro_batch = micro;
      t.st.by_default(memplan::path(Count::micro_batch), fmt::format("default of torchtitan's JobConfig: pipeline_parallel_microbatch_size = 1 ({})", kJob));
    }
  }
  if (t.global_batch <= 0) {
    s.batch.grad_accum = 1;  // -1: local_batch_size x data-parallel ranks, no accumulation (torchtitan/train.py @ v0.2.2)
    t.st.by_default(memplan::path(Count::grad_accum), "default of torchtitan's JobConfig: training.global_batch_size = -1 (no accumulation)");
    return;
  }
  t.st.out.global_batch = t.global_batch;
  t.st.note(memplan::path(Setting::global_batch), *t.global_node);
  const int64_t dp = t.replicate * (t.shard > 0 ? t.shard : 1);
  if (t.shard <= 0)
    t.st.defer(memplan::path(Count::grad_accum), t.global_node->where,
               "gradient accumulation = global_batch_size / (local_batch_size x data-parallel ranks) needs the GPU count, "
               "which this torchtitan config leaves to the launcher; estimating with the data-parallel ranks the file gives",
               "pass --gpus N and --grad-accum global / (local x data-parallel ranks)");
  if (t.global_batch % (t.local_batch * dp) != 0)
    throw InputError(t.global_node->where,
                     fmt::format("training.global_batch_size {} is not a multiple of local_batch_size {} x {} data-parallel "
                                 "ranks (torchtitan asserts it)",
                                 t.global_batch, t.local_batch, dp),
                     "make global_batch_size a multiple of local_batch_size x data-parallel ranks");
  t.st.set(memplan::path(Count::grad_accum), s.batch.grad_accum, t.global_batch / (t.local_batch * dp) * (t.local_batch / micro), *t.global_node);
}

void resolve_checkpointing(Tt& t) {
  Checkpointing& c = t.s().checkpointing;
  const Node* at = t.ac_option_node && t.ac_mode == "selective" ? t.ac_option_node : t.ac_mode_node;
  if (t.ac_mode == "none") c.mode = CheckpointMode::none;
  else if (t.ac_mode == "full") c.mode = CheckpointMode::full;
  else if (t.ac_mode == "memory_budget") {
    c.mode = CheckpointMode::none;
    t.st.unmodelled(*t.ac_mode_node, "the compiler's memory-budget checkpointing is not modelled: estimated without "
                                     "checkpointing (an over-estimate)");
  } else if (t.ac_mode == "selective") {
    if (t.ac_option == "op") {
      // Per-op SAC: every other matmul output and the SDPA outputs saved
      // (_apply_op_sac, torchtitan/distributed/activation_checkpoint.py @ v0.2.2).
      c.mode = CheckpointMode::selective_op;
    } else {
      const Node* opt = t.ac_option_node;
      const bool digits = !t.ac_option.empty() && t.ac_option.find_first_not_of("0123456789") == std::string::npos;
      if (!digits)
        throw InputError(opt ? opt->where : t.ac_mode_node->where,
                         fmt::format("selective_ac_option must be a positive integer or \"op\" (got '{}')", t.ac_option),
                         "e.g. selective_ac_option = \"2\" (every second layer) or \"op\"");
      const int64_t k = std::stoll(t.ac_option.substr(0, 9));
      c = one_layer_in(k == 0 ? 1 : k, t.s().model.num_layers);
    }
  } else {
    throw InputError(t.ac_mode_node->where, fmt::format("unknown activation_checkpoint.mode '{}'", t.ac_mode),
                     "expected one of: none, selective, full, memory_budget");
  }
  if (at) t.st.note(memplan::path(Choice::checkpointing), *at);
  else
    t.st.by_default(memplan::path(Choice::checkpointing), fmt::format("default of torchtitan's JobConfig: [activation_checkpoint] mode = \"selective\", "
                                                 "selective_ac_option = \"2\": every second layer ({} L651-659)", kJob));
}

// model.converters names the float8 / MX model converters; [quantize.linear.float8] tables are
// inert without them (torchtitan/components/quantization/{float8,mx}.py @ v0.2.2).
void resolve_converters(Tt& t) {
  for (const std::string& c : t.converters) {
    if (c == "float8" || c == "quantize.linear.float8" || c == "quantize.grouped_mm.float8") {
      t.st.set(Switch::fp8, true, *t.converters_node);
    } else if (c == "mx" || c == "quantize.linear.mx" || c == "quantize.grouped_mm.mx") {
      t.st.set(Switch::fp8, true, *t.converters_node);
      t.st.unmodelled(*t.converters_node, "MX (microscaling) training is estimated as float8 linears");
    }
  }
}

}  // namespace

void read_torchtitan(const Node& root, ReadState& st) {
  Tt t(st);
  st.s().runtime.framework = Framework::torchtitan;
  st.by_default(memplan::path(Choice::framework), "a torchtitan TOML job config ([model] name and flavor)");
  read_section(root, {&root_keys()}, t, &st.out.warnings);
  resolve_model(t);
  resolve_parallel(t);
  resolve_batch(t);
  resolve_checkpointing(t);
  resolve_converters(t);
}

}  // namespace memplan::profiles::detail
