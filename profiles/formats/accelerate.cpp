// accelerate's config file (`accelerate config`, default_config.yaml; accelerate v1.14.0): the
// launch around a training script, not the training itself. It says the engine (DDP, DeepSpeed
// with its ZeRO stage and offload or a DeepSpeed config file, FSDP with its strategy), the mixed
// precision and the process count; it names no model, batch or sequence length: --model (or a
// memplan `model:` key) and the batch flags supply those.
#include <fmt/format.h>

#include <cctype>

#include "profiles/formats/hf_family.h"

namespace memplan::profiles::detail {
namespace hf {
namespace {

constexpr const char* kPlugin = "src/accelerate/utils/dataclasses.py @ v1.14.0";

bool yes(const Node& n) { return flag(n, "accelerate reads true or false here"); }

// YAML 1.1 reads an unquoted NO / no as false: accelerate's own files quote them ('NO').
std::string upper_text(const Node& n) {
  if (n.kind == Node::Kind::scalar && !n.quoted && (lower(n.text) == "false" || lower(n.text) == "no")) return "NO";
  std::string t = as_text(n);
  for (char& c : t) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return t;
}

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> k = {
      "compute_environment", "distributed_type", "mixed_precision", "num_processes", "num_machines", "machine_rank",
      "main_process_ip", "main_process_port", "rdzv_backend", "same_network", "main_training_function", "gpu_ids",
      "use_cpu", "debug", "downcast_bf16", "enable_cpu_affinity", "tpu_env", "tpu_use_cluster", "tpu_use_sudo",
      "tpu_name", "tpu_zone", "commands", "command_file", "fsdp_config", "deepspeed_config", "dynamo_config",
      "dynamo_backend", "fp8_config", "megatron_lm_config", "parallelism_config", "ipex_config", "mpirun_config",
      "fp16", "model"};
  return k;
}

// An FSDP option under fsdp_config, with or without the fsdp_ prefix (launch adds it).
const Node* fsdp_key(const Node& cfg, const char* name) {
  if (const Node* n = cfg.find(fmt::format("fsdp_{}", name))) return n;
  return cfg.find(name);
}

void read_fsdp(const Node& cfg, ReadState& st, const Node& type_node) {
  if (cfg.kind != Node::Kind::map) not_a_map(cfg);
  check_fsdp_option_names(cfg, st);
  TrainingSetup& s = st.s();
  int version = 1;  // launch default "1" (src/accelerate/commands/launch.py @ v1.14.0)
  if (const Node* v = fsdp_key(cfg, "version")) {
    version = static_cast<int>(as_int(*v));
    if (version != 1 && version != 2) throw InputError(v->where, fmt::format("unknown FSDP version {}", version), "FSDP is version 1 or 2");
    note(st, memplan::path(Setting::fsdp_version), *v);
  }
  s.parallel.fsdp_version = version;
  s.parallel.fsdp = FsdpMode::full_shard;  // launch default fsdp_sharding_strategy FULL_SHARD / reshard_after_forward true
  note(st, memplan::path(Choice::fsdp), type_node, "distributed_type: FSDP (FULL_SHARD by default)");
  const Node* strategy = fsdp_key(cfg, "sharding_strategy");
  const Node* reshard = fsdp_key(cfg, "reshard_after_forward");
  bool hybrid_zero2 = false;
  if (version == 2 && reshard) {
    s.parallel.fsdp = yes(*reshard) ? FsdpMode::full_shard : FsdpMode::shard_grad_op;
    note(st, memplan::path(Choice::fsdp), *reshard);
  } else if (const Node* n = strategy ? strategy : (version == 1 ? reshard : nullptr)) {
    const auto m = fsdp_strategy(as_text(*n), &hybrid_zero2);
    if (!m)
      throw InputError(n->where, fmt::format("unknown FSDP sharding strategy '{}'", as_text(*n)),
                       "accelerate takes FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 or their "
                       "numbers 1-5 (src/accelerate/utils/constants.py @ v1.14.0 FSDP_SHARDING_STRATEGY)");
    s.parallel.fsdp = *m;
    note(st, memplan::path(Choice::fsdp), *n);
    if (hybrid_zero2) st.unmodelled(*n, "HYBRID_SHARD_ZERO2 keeps gathered parameters until backward; estimated as hybrid_shard");
  }
  if (const Node* n = fsdp_key(cfg, "offload_params"); n && yes(*n)) {
    s.parallel.offload = Offload::optimizer_and_params;
    note(st, memplan::path(Choice::offload), *n, "fsdp_offload_params (FSDP CPUOffload: parameters, gradients and the step on the CPU)");
  }
  if (const Node* n = fsdp_key(cfg, "activation_checkpointing"); n && yes(*n)) {
    s.checkpointing.mode = CheckpointMode::full;
    note(st, memplan::path(Choice::checkpointing), *n);
  }
  if (const Node* n = fsdp_key(cfg, "auto_wrap_policy"); n && upper_text(*n) == "NO_WRAP")
    st.unmodelled(*n, "without wrapping the whole model is one FSDP unit, gathered at once; the estimate gathers one layer at a time");
}

// The DeepSpeed launch: a config file, or the config accelerate builds from zero_stage and the
// offload devices (DeepSpeedPlugin.__post_init__, dataclasses.py @ v1.14.0 L1227-1344).
void read_deepspeed_launch(const Node& cfg, ReadState& st, const Node& type_node, const DeepSpeedFill& fill, Launch& l) {
  if (cfg.kind != Node::Kind::map) not_a_map(cfg);
  TrainingSetup& s = st.s();
  if (const Node* file = cfg.find("deepspeed_config_file")) {
    // With a file, accelerate refuses the settings it would otherwise write (_deepspeed_config_checks,
    // dataclasses.py @ v1.14.0 L1505-1530).
    for (const char* k : {"zero_stage", "offload_optimizer_device", "offload_param_device", "offload_optimizer_nvme_path",
                          "offload_param_nvme_path", "gradient_accumulation_steps", "gradient_clipping", "zero3_save_16bit_model"})
      if (const Node* n = cfg.find(k))
        throw InputError(n->where, fmt::format("{} beside deepspeed_config_file", n->path),
                         "accelerate refuses it: the DeepSpeed config file decides it (When using `deepspeed_config_file`, "
                         "the following accelerate config variables will be ignored); move it into that file");
    if (l.mixed_node)
      throw InputError(l.mixed_node->where, "mixed_precision beside deepspeed_config_file",
                       "accelerate refuses it: enable bf16 or fp16 in the DeepSpeed config file (or write \"auto\" there and "
                       "pass --mixed_precision to accelerate launch)");
    const std::string path = find_beside(*file, as_text(*file), st, "deepspeed_config_file",
                                         "deepspeed_config_file names a DeepSpeed config JSON");
    l.ds = apply_deepspeed(parse_json(read_text_file(path), path), path, st, fill, *file);
    return;
  }
  // zero_stage defaults to 2 (ACCELERATE_DEEPSPEED_ZERO_STAGE, dataclasses.py @ v1.14.0 L1235-1236).
  if (const Node* n = cfg.find("zero_stage")) {
    const int64_t stage = as_int(*n);
    if (stage < 0 || stage > 3) throw InputError(n->where, fmt::format("zero_stage must be 0, 1, 2 or 3 (got {})", stage),
                                                  "DeepSpeed's ZeRO stages: 0 (off), 1 (optimizer states), 2 (+ gradients), 3 (+ parameters)");
    s.parallel.zero_stage = static_cast<int>(stage);
    note(st, memplan::path(Count::zero_stage), *n);
  } else {
    s.parallel.zero_stage = 2;
    note_default(st, memplan::path(Count::zero_stage), fmt::format("accelerate DeepSpeedPlugin default zero_stage=2 ({} L1235-1236)", kPlugin));
  }
  auto device = [&](const char* key, Offload what) {
    const Node* n = cfg.find(key);
    if (!n) return;
    const std::string d = lower(as_text(*n));
    if (d == "cpu" || d == "nvme") {
      if (offload_union(s.parallel.offload, what) != s.parallel.offload) {
        s.parallel.offload = offload_union(s.parallel.offload, what);
        note(st, memplan::path(Choice::offload), *n);
      }
    } else if (d != "none") {
      throw InputError(n->where, fmt::format("unknown offload device '{}'", as_text(*n)), "accelerate takes none, cpu or nvme");
    }
  };
  device("offload_optimizer_device", Offload::optimizer);
  device("offload_param_device", Offload::params);
  if (const Node* n = cfg.find("gradient_accumulation_steps"); n && !(n->kind == Node::Kind::scalar && n->text == "auto")) {
    s.batch.grad_accum = positive(*n, "gradient_accumulation_steps counts micro-batches per optimizer step");
    note(st, memplan::path(Count::grad_accum), *n);
  }
  // The generated config sets no buckets: DeepSpeed's defaults, overlap_comm only at stage 3.
  default_overlap_comm(st);
  s.runtime.framework = Framework::deepspeed;
  note(st, memplan::path(Choice::framework), type_node, "distributed_type: DEEPSPEED (the DeepSpeed engine runs the step)");
  // The 16-bit type: the launcher's (accelerate adds {"bf16": {"enabled": true}} or fp16, set_mixed_precision L1413-1440).
  DeepSpeedRead r;
  r.precision = fill.bf16 ? Precision::mixed_bf16 : fill.fp16 ? Precision::mixed_fp16 : Precision::fp32;
  r.precision_where = l.mixed_node ? l.mixed_node->where : type_node.where;
  r.precision_text = fmt::format("{} (DeepSpeed {})", l.mixed_node ? l.mixed_node->path : std::string(fill.bf16_key),
                                 fill.bf16 ? "bf16 with fp32 master weights" : fill.fp16 ? "fp16 with fp32 master weights" : "fp32");
  l.ds = r;
}

}  // namespace

Launch apply_accelerate(const Node& root, ReadState& st, const DeepSpeedFill* trainer) {
  TrainingSetup& s = st.s();
  Launch l;
  const Node* type = root.find("distributed_type");
  if (!type)
    throw InputError(Where::at_file(st.path), "an accelerate config needs distributed_type",
                     "accelerate refuses the file without it (A `distributed_type` must be specified in the config file, "
                     "src/accelerate/commands/config/config_args.py @ v1.14.0)");
  const std::string kind = upper_text(*type);
  if (const Node* n = root.find("compute_environment"); n && upper_text(*n) == "AMAZON_SAGEMAKER")
    st.unmodelled(*n, "SageMaker's launcher is not modelled; the estimate reads the rest of the file as a local launch");
  if (const Node* n = root.find("use_cpu"); n && yes(*n))
    st.unmodelled(*n, "the script runs on the CPU; the estimate is for a GPU", "pass --device cpu to estimate against host memory");
  // Mixed precision ('no' unquoted is YAML false); legacy fp16: true (config_args.py process_config).
  if ((l.mixed_node = root.find("mixed_precision"))) {
    l.mixed_precision = lower(upper_text(*l.mixed_node));
    if (l.mixed_precision != "no" && l.mixed_precision != "fp16" && l.mixed_precision != "bf16" && l.mixed_precision != "fp8")
      throw InputError(l.mixed_node->where, fmt::format("unknown mixed_precision '{}'", as_text(*l.mixed_node)),
                       "accelerate takes no, fp16, bf16 or fp8");
  } else if (const Node* n = root.find("fp16"); n && yes(*n)) {
    l.mixed_precision = "fp16";
    l.mixed_node = n;
  }
  if (l.mixed_precision == "fp8") {
    s.runtime.fp8 = true;
    note(st, path(Switch::fp8), *l.mixed_node);
  }
  // Processes: the world size over all machines; num_machines splits it into nodes.
  const Node* procs = root.find("num_processes");
  if (kind == "NO") {
    s.parallel.num_gpus = 1;  // one process (simple_launcher), whatever num_processes says
    note(st, memplan::path(Count::num_gpus), *type, "distributed_type: NO (one process)");
  } else if (procs) {
    s.parallel.num_gpus = positive(*procs, "num_processes is the number of processes (GPUs) over all machines");
    note(st, memplan::path(Count::num_gpus), *procs);
  }
  if (const Node* m = root.find("num_machines")) {
    const int64_t machines = positive(*m, "num_machines is the number of nodes");
    if (procs && s.parallel.num_gpus % machines == 0) {
      s.parallel.gpus_per_node = s.parallel.num_gpus / machines;
      note(st, memplan::path(Count::gpus_per_node), *m, fmt::format("num_processes / num_machines = {}", s.parallel.gpus_per_node));
    }
  }
  // torch.compile: a dynamo backend other than NO (dynamo_config, or the legacy top-level dynamo_backend).
  const Node* dynamo = nullptr;
  if (const Node* dc = root.find("dynamo_config"); dc && dc->kind == Node::Kind::map)
    dynamo = dc->find("dynamo_backend");
  if (!dynamo) dynamo = root.find("dynamo_backend");
  if (dynamo) {
    s.runtime.compile = upper_text(*dynamo) != "NO";
    note(st, path(Switch::compile), *dynamo);
  }
  if (const Node* mc = root.find("megatron_lm_config"); mc && mc->kind == Node::Kind::map) {
    if (const Node* n = mc->find("megatron_lm_tp_degree")) {
      s.parallel.tensor_parallel = positive(*n, "the tensor-parallel degree");
      note(st, memplan::path(Count::tensor_parallel), *n);
    }
    if (const Node* n = mc->find("megatron_lm_pp_degree")) {
      s.parallel.pipeline_parallel = positive(*n, "the pipeline-parallel degree");
      note(st, memplan::path(Count::pipeline_parallel), *n);
    }
  }
  if (const Node* pc = root.find("parallelism_config"); pc && pc->kind == Node::Kind::map) {
    for (const auto& [key, value] : pc->entries) {
      const std::string k = key.rfind("parallelism_config_", 0) == 0 ? key.substr(19) : key;
      if (k == "tp_size" && as_int(value) > 1) {
        s.parallel.tensor_parallel = positive(value, "the tensor-parallel degree");
        note(st, memplan::path(Count::tensor_parallel), value);
      } else if ((k == "cp_size" || k == "sp_size") && as_int(value) > 1) {
        st.unmodelled(value, "context/sequence parallelism splits each sequence over GPUs; the estimate keeps whole sequences");
      } else if (k == "dp_replicate_size" && as_int(value) > 1) {
        st.unmodelled(value, "replicated FSDP groups are not modelled; the estimate shards over every data-parallel GPU");
      }
    }
  }
  DeepSpeedFill fill;
  if (trainer) {
    fill = *trainer;
  } else {
    fill.must_match = false;
    fill.bf16 = l.mixed_precision == "bf16" || l.mixed_precision == "fp8";
    fill.fp16 = l.mixed_precision == "fp16";
    fill.bf16_key = fill.fp16_key = l.mixed_node ? l.mixed_node->path : "mixed_precision (absent: no)";
  }
  if (kind == "DEEPSPEED") {
    l.deepspeed = true;
    const Node* dc = root.find("deepspeed_config");
    Node empty;
    empty.kind = Node::Kind::map;
    empty.path = "deepspeed_config";
    read_deepspeed_launch(dc ? *dc : empty, st, *type, fill, l);
  } else if (kind == "FSDP") {
    l.fsdp = true;
    Node empty;
    empty.kind = Node::Kind::map;
    const Node* fc = root.find("fsdp_config");
    read_fsdp(fc ? *fc : empty, st, *type);
  } else if (kind == "MULTI_GPU" || kind == "NO") {
    // DDP (or one process): nothing sharded.
  } else if (kind == "MEGATRON_LM") {
    st.unmodelled(*type, "accelerate's Megatron-LM engine is read for its tensor/pipeline degrees only; the estimate "
                         "keeps the HF model's data-parallel states");
  } else {
    st.unmodelled(*type, "it does not run on CUDA GPUs (CPU, TPU or another accelerator); the estimate is for a CUDA GPU");
  }
  if (!procs && kind != "NO")
    note_default(st, memplan::path(Count::num_gpus), "not in the file: accelerate launch --num_processes decides; pass --gpus");
  return l;
}

}  // namespace hf

namespace {

// The launch alone: the precision is accelerate's mixed_precision.
void read_accelerate(const Node& root, ReadState& st) {
  hf::check_keys(root, st, hf::known_keys(), "accelerate");
  // memplan's own model: key (accelerate's file has none): a preset, HF id or config.json.
  if (const Node* m = root.find("model")) {
    if (m->kind == Node::Kind::map) {
      const Node* name = m->find("preset") ? m->find("preset") : m->find("hf_config") ? m->find("hf_config") : m->find("name");
      if (!name) type_error(*m, "a model name (a preset, HF id or config.json path) or a mapping with preset: or hf_config:");
      const std::string text = as_text(*name);
      st.use_model(name->path == "model.hf_config" ? st.beside(text).string() : text, *name);
    } else {
      st.use_model(as_text(*m), *m);
    }
  }
  const hf::Launch l = hf::apply_accelerate(root, st, nullptr);
  TrainingSetup& s = st.s();
  // The training script decides the batch and the sequence; a DeepSpeed config may state the
  // micro-batch. Said unless a flag gives them.
  if (!st.out.origin.fields.count(memplan::path(Count::micro_batch)))
    st.defer(memplan::path(Count::micro_batch), Where::at_file(st.path),
             fmt::format("the micro-batch is the training script's, not in this accelerate config: estimated at {}", s.batch.micro_batch),
             "pass --micro-batch N (the script's per-GPU batch)");
  if (!st.out.origin.fields.count(memplan::path(Count::seq_len)))
    st.defer(memplan::path(Count::seq_len), Where::at_file(st.path),
             fmt::format("the sequence length is the training script's, not in this accelerate config: estimated at {}", s.batch.seq_len),
             "pass --seq-len N");
  const std::string mp = l.mixed_precision.empty() ? "no" : l.mixed_precision;
  if (l.ds) {
    s.precision = *l.ds->precision;
    Where w = l.ds->precision_where;
    w.key = l.ds->precision_text;
    st.out.origin.set(memplan::path(Choice::precision), w);
    return;
  }
  const bool half = mp != "no";
  const bool bf = mp == "bf16" || mp == "fp8";
  if (!half) {
    s.precision = Precision::fp32;
    if (l.mixed_node) hf::note(st, memplan::path(Choice::precision), *l.mixed_node);
    else hf::note_default(st, memplan::path(Choice::precision), "accelerate launch default mixed_precision='no' (src/accelerate/commands/launch.py @ v1.14.0)");
  } else if (l.fsdp) {
    // FSDP mixed precision: fp32 shards (trainable parameters upcast), 16-bit gathered compute.
    s.precision = bf ? Precision::mixed_bf16 : Precision::mixed_fp16;
    hf::note(st, memplan::path(Choice::precision), *l.mixed_node,
             fmt::format("{} under FSDP: fp32 shards, {} compute (src/accelerate/utils/dataclasses.py @ v1.14.0 L2090-2124; "
                         "src/accelerate/accelerator.py @ v1.14.0 L1985-2031)",
                         l.mixed_node->path, bf ? "bf16" : "fp16"));
  } else {
    s.precision = bf ? Precision::amp_bf16 : Precision::amp_fp16;
    hf::note(st, memplan::path(Choice::precision), *l.mixed_node, fmt::format("{} (autocast over fp32 weights)", l.mixed_node->path));
  }
}

}  // namespace

void read_accelerate_config(const Node& root, ReadState& st) { read_accelerate(root, st); }

}  // namespace memplan::profiles::detail
