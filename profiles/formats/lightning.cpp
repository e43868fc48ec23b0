// LightningCLI configs (`python main.py fit --config FILE`), read as pytorch-lightning 2.6.5 reads
// them: trainer: holds Trainer.__init__ arguments (src/lightning/pytorch/trainer/trainer.py @ 2.6.5)
// and model:/data: the user's own classes, so the architecture, batch and sequence length are not
// Lightning keys. The model comes from --model, a memplan `model:` ({preset: ...}), or an id key
// the user's module takes (model_name_or_path, ...). Files that memplan wrote (`plan --emit
// lightning`) carry the rest of the plan in a commented memplan YAML block, which Lightning ignores
// and this reader reads first: what trainer: says then wins, as it is what Lightning runs.
#include <fmt/format.h>

#include <cstdlib>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "profiles/formats.h"

namespace memplan::profiles::detail {
namespace {

constexpr const char* kPl = "pytorch-lightning 2.6.5";
constexpr const char* kBlockBegin = "# --- memplan setup";
constexpr const char* kBlockEnd = "# --- end memplan setup";

// The commented block as YAML at its own lines and columns ('#' becomes a space); "" without one.
std::string memplan_block(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  bool inside = false, found = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(kBlockBegin, 0) == 0) {
      inside = found = true;
    } else if (line.rfind(kBlockEnd, 0) == 0) {
      inside = false;
    } else if (inside && !line.empty() && line[0] == '#') {
      line[0] = ' ';
      out += line;
    }
    out += '\n';
  }
  return found ? out : "";
}

enum class StrategyKind { automatic, ddp, fsdp, model_parallel, deepspeed, single, other };

struct Pl {
  explicit Pl(ReadState& state) : st(state) {}
  ReadState& st;
  bool from_block = false;
  // trainer:
  const Node* devices = nullptr;
  int64_t per_node = 1;
  bool devices_auto = true;  // Trainer(devices="auto")
  const Node* nodes_node = nullptr;
  int64_t nodes = 1;
  const Node* precision = nullptr;
  const Node* strategy = nullptr;
  StrategyKind kind = StrategyKind::automatic;
  int zero = 2;  // DeepSpeedStrategy(stage=2)
  bool offload_optimizer = false, offload_params = false;
  FsdpMode fsdp = FsdpMode::full_shard;  // FSDPStrategy(sharding_strategy="FULL_SHARD")
  bool fsdp_cpu_offload = false;
  const Node* ckpt_policy = nullptr;
  int64_t reduce_bucket = 200'000'000, allgather_bucket = 200'000'000;  // DeepSpeedStrategy defaults
  bool overlap_comm = true;
  const Node* reduce_node = nullptr;
  const Node* allgather_node = nullptr;
  const Node* overlap_node = nullptr;
  // ModelParallelStrategy(data_parallel_size="auto", tensor_parallel_size="auto"): the tensor-
  // parallel size, or 0 for "auto" (the devices per node).
  int64_t mp_tensor = 0;
  const Node* mp_tensor_node = nullptr;

  TrainingSetup& s() { return st.s(); }
};
using Table = KeyTable<Pl>;

// Trainer(devices=...): an int, a list of indices, "auto", "-1", "N" or "i,j,..."
// (_normalize_parse_gpu_string_input, src/lightning/fabric/utilities/device_parser.py @ 2.6.5).
void read_devices(const Node& n, Pl& t) {
  t.devices = &n;
  t.devices_auto = false;
  // Each GPU once: Lightning refuses a repeated index (_check_unique, "Device ID's (GPU) must be
  // unique.", src/lightning/fabric/utilities/device_parser.py @ 2.6.5), so [0, 0, 0, 0] is no job
  // on four GPUs.
  // One pass with a set: a list of thousands of indices costs no more than reading it.
  std::unordered_set<int64_t> seen;
  auto refuse_repeat = [&](int64_t id, const Where& w) {
    if (!seen.insert(id).second)
      throw InputError(w, fmt::format("trainer.devices lists GPU {} twice", id),
                       "Lightning refuses repeated device ids (\"Device ID's (GPU) must be unique.\"): list each GPU once");
  };
  if (n.kind == Node::Kind::list) {
    t.per_node = static_cast<int64_t>(n.items.size());
    for (const Node& i : n.items) refuse_repeat(as_int(i), i.where);
  } else {
    const std::string v = lower(as_text(n));
    if (v == "auto" || v == "-1") {
      t.devices_auto = true;
      t.per_node = 1;
      return;
    }
    if (v.find(',') != std::string::npos) {
      const std::vector<std::string> parts = split_list(v);
      t.per_node = static_cast<int64_t>(parts.size());
      for (const std::string& part : parts) {
        char* end = nullptr;
        const long long id = std::strtoll(part.c_str(), &end, 10);
        if (end && *end == '\0' && !part.empty()) refuse_repeat(id, n.where);
      }
    } else {
      const Node plain = n.quoted ? Node{Node::Kind::scalar, v, false, n.path, n.where, {}, {}} : n;
      if (as_int(plain) < 1)
        throw InputError(n.where, "trainer.devices names no device", "devices: N GPUs per node, a list of GPU indices, or \"auto\"");
      t.per_node = as_count(plain);
    }
  }
  if (t.per_node < 1)
    throw InputError(n.where, "trainer.devices names no device", "devices: N GPUs per node, a list of GPU indices, or \"auto\"");
}

std::string class_name(const std::string& class_path) { return class_path.substr(class_path.rfind('.') + 1); }

// A name from Lightning's strategy registry (register_strategies in src/lightning/pytorch/strategies/ @ 2.6.5).
void read_strategy_name(const Node& n, Pl& t) {
  const std::string v = lower(as_text(n));
  if (v == "auto") t.kind = StrategyKind::automatic;
  else if (v.rfind("ddp", 0) == 0) t.kind = StrategyKind::ddp;
  else if (v == "single_device") t.kind = StrategyKind::single;
  else if (v == "fsdp") t.kind = StrategyKind::fsdp;
  else if (v == "fsdp_cpu_offload") {
    t.kind = StrategyKind::fsdp;
    t.fsdp_cpu_offload = true;  // FSDPStrategy(cpu_offload=True), fsdp.py @ 2.6.5 L496-501
  } else if (v == "deepspeed") t.kind = StrategyKind::deepspeed;
  else if (v.rfind("deepspeed_stage_", 0) == 0) {
    // deepspeed.py @ 2.6.5 L781-799: stage_1, stage_2, stage_2_offload (optimizer), stage_3,
    // stage_3_offload (optimizer and parameters), stage_3_offload_nvme.
    t.kind = StrategyKind::deepspeed;
    const std::string rest = v.substr(16);
    if (rest == "1" || rest == "2" || rest == "3") t.zero = rest[0] - '0';
    else if (rest == "2_offload") {
      t.zero = 2;
      t.offload_optimizer = true;
    } else if (rest == "3_offload" || rest == "3_offload_nvme") {
      t.zero = 3;
      t.offload_optimizer = t.offload_params = true;
      if (rest == "3_offload_nvme") t.st.unmodelled(n, "NVMe offload is estimated as CPU offload (host memory)");
    } else {
      throw InputError(n.where, fmt::format("unknown strategy '{}'", as_text(n)),
                       "DeepSpeed strategies: deepspeed, deepspeed_stage_1, deepspeed_stage_2, deepspeed_stage_2_offload, "
                       "deepspeed_stage_3, deepspeed_stage_3_offload, deepspeed_stage_3_offload_nvme");
    }
  } else if (v == "xla" || v == "single_xla" || v == "xla_debug" || v == "xla_fsdp") {
    t.kind = StrategyKind::other;
    t.st.unmodelled(n, "XLA (TPU) strategies are not modelled: estimated as DDP on GPUs");
  } else {
    const std::vector<std::string> names = {"auto", "ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", "single_device", "fsdp",
                                            "fsdp_cpu_offload", "deepspeed", "deepspeed_stage_1", "deepspeed_stage_2",
                                            "deepspeed_stage_2_offload", "deepspeed_stage_3", "deepspeed_stage_3_offload"};
    const auto near = nearest(v, names);
    throw InputError(n.where, fmt::format("unknown strategy '{}'", as_text(n)),
                     near.empty() ? fmt::format("Lightning's strategies: {}", fmt::join(names, ", "))
                                  : fmt::format("did you mean '{}'?", fmt::join(near, "' or '")));
  }
}

bool truthy(const Node& n) {
  if (n.kind == Node::Kind::map || n.kind == Node::Kind::list) return n.kind == Node::Kind::map || !n.items.empty();
  if (n.kind != Node::Kind::scalar) return false;
  const std::string v = lower(n.text);
  if (v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off" || v == "null" || v.empty()) return false;
  return true;  // a class name (CPUOffload, a policy)
}

void read_fsdp_args(const Node& a, Pl& t) {
  if (a.kind != Node::Kind::map) not_a_map(a);
  for (const auto& [key, v] : a.entries) {
    if (v.kind == Node::Kind::null) continue;
    if (key == "sharding_strategy") {
      // _init_sharding_strategy (src/lightning/fabric/strategies/fsdp.py @ 2.6.5): the name, upper-cased.
      std::string s = as_text(v);
      for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (s.rfind("SHARDINGSTRATEGY.", 0) == 0) s = s.substr(17);
      if (s == "FULL_SHARD") t.fsdp = FsdpMode::full_shard;
      else if (s == "SHARD_GRAD_OP") t.fsdp = FsdpMode::shard_grad_op;
      else if (s == "NO_SHARD") t.fsdp = FsdpMode::no_shard;
      else if (s == "HYBRID_SHARD") t.fsdp = FsdpMode::hybrid_shard;
      else if (s == "_HYBRID_SHARD_ZERO2") {
        t.fsdp = FsdpMode::hybrid_shard;
        t.st.unmodelled(v, "hybrid sharding with SHARD_GRAD_OP inside each node is estimated as HYBRID_SHARD");
      } else {
        throw InputError(v.where, fmt::format("unknown sharding_strategy '{}'", as_text(v)),
                         "expected one of: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2");
      }
      t.st.note(memplan::path(Choice::fsdp), v);
    } else if (key == "cpu_offload") {
      t.fsdp_cpu_offload = truthy(v);
      t.st.note(memplan::path(Choice::offload), v);
    } else if (key == "activation_checkpointing_policy" || key == "activation_checkpointing") {
      if (truthy(v)) t.ckpt_policy = &v;
    } else if (key == "mixed_precision") {
      t.st.unmodelled(v, "an explicit FSDP MixedPrecision policy is not read: the precision comes from trainer.precision");
    }
  }
}

void read_deepspeed_args(const Node& a, Pl& t) {
  if (a.kind != Node::Kind::map) not_a_map(a);
  for (const auto& [key, v] : a.entries) {
    if (v.kind == Node::Kind::null) continue;
    if (key == "stage") {
      const int64_t s = as_int(v);
      if (s < 0 || s > 3) type_error(v, "a ZeRO stage 0, 1, 2 or 3");
      t.zero = static_cast<int>(s);
      t.st.note(memplan::path(Count::zero_stage), v);
    } else if (key == "offload_optimizer") {
      t.offload_optimizer = as_bool(v);
      t.st.note(memplan::path(Choice::offload), v);
    } else if (key == "offload_parameters") {
      t.offload_params = as_bool(v);
      t.st.note(memplan::path(Choice::offload), v);
    } else if (key == "reduce_bucket_size") {
      t.reduce_bucket = as_int(v);
      t.reduce_node = &v;
    } else if (key == "allgather_bucket_size") {
      t.allgather_bucket = as_int(v);
      t.allgather_node = &v;
    } else if (key == "overlap_comm") {
      t.overlap_comm = as_bool(v);
      t.overlap_node = &v;
    } else if (key == "zero_optimization") {
      if (!as_bool(v)) t.zero = 0;
    } else if (key == "config") {
      t.st.unmodelled(v, "the DeepSpeed config given to DeepSpeedStrategy is not read here: its ZeRO stage, offload and "
                         "buckets replace the strategy's arguments",
                      "read the DeepSpeed JSON itself: memplan estimate --config ds_config.json --model ...");
    } else if (key == "partition_activations" || key == "cpu_checkpointing") {
      if (as_bool(v))
        t.st.unmodelled(v, "DeepSpeed activation partitioning / CPU checkpointing is not modelled: the checkpointed inputs "
                           "stay whole on the GPU");
    } else if (key == "offload_params_device" || key == "offload_optimizer_device") {
      if (lower(as_text(v)) == "nvme") t.st.unmodelled(v, "NVMe offload is estimated as CPU offload (host memory)");
    }
  }
}

void read_strategy(const Node& n, Pl& t) {
  t.strategy = &n;
  if (n.kind == Node::Kind::scalar) return read_strategy_name(n, t);
  if (n.kind != Node::Kind::map) type_error(n, "a strategy name or {class_path, init_args}");
  const Node* cls = n.find("class_path");
  if (!cls) throw InputError(n.where, "trainer.strategy has no class_path", "e.g. class_path: lightning.pytorch.strategies.FSDPStrategy");
  const std::string name = class_name(as_text(*cls));
  const Node* args = n.find("init_args");
  if (name == "FSDPStrategy") {
    t.kind = StrategyKind::fsdp;
    if (args) read_fsdp_args(*args, t);
  } else if (name == "DeepSpeedStrategy") {
    t.kind = StrategyKind::deepspeed;
    if (args) read_deepspeed_args(*args, t);
  } else if (name == "DDPStrategy") {
    t.kind = StrategyKind::ddp;
    if (args)
      if (const Node* view = args->find("gradient_as_bucket_view"))
        t.st.set(memplan::path(Setting::ddp_bucket_view), t.s().parallel.ddp_bucket_view, as_bool(*view), *view);
  } else if (name == "ModelParallelStrategy") {
    // FSDP2 (fully_shard) over the data-parallel mesh dimension and tensor parallelism over the
    // other, as the LightningModule's configure_model applies them; an "auto" tensor-parallel size
    // is the devices per node (ModelParallelStrategy.setup_environment, src/lightning/pytorch/
    // strategies/model_parallel.py @ 2.6.5).
    t.kind = StrategyKind::model_parallel;
    if (args)
      if (const Node* v = args->find("tensor_parallel_size"); v && !(v->kind == Node::Kind::scalar && as_text(*v) == "auto")) {
        t.mp_tensor = as_count(*v);
        if (t.mp_tensor < 1) type_error(*v, "a positive integer or \"auto\"");
        t.mp_tensor_node = v;
      }
    t.st.unmodelled(*cls, "ModelParallelStrategy runs the LightningModule's own configure_model: estimated as FSDP2 (fully_shard) "
                          "over the data-parallel size with tensor parallelism over the tensor-parallel size");
  } else if (name == "SingleDeviceStrategy") {
    t.kind = StrategyKind::single;
  } else {
    t.kind = StrategyKind::other;
    t.st.unmodelled(*cls, "a strategy memplan does not know: estimated as DDP");
  }
}

const Table& trainer_keys() {
  static const Table k = {
      {{"devices"}, read_devices},
      {{"num_nodes"}, [](const Node& n, Pl& t) {
         t.nodes = as_count(n);
         if (t.nodes < 1) type_error(n, "a positive integer");
         t.nodes_node = &n;
       }},
      {{"precision"}, [](const Node& n, Pl& t) { t.precision = &n; }},
      {{"strategy"}, read_strategy},
      {{"accumulate_grad_batches"}, [](const Node& n, Pl& t) {
         if (n.kind == Node::Kind::map) {
           t.st.unmodelled(n, "a scheduled accumulation (epoch -> factor) is estimated with the memplan default of 1");
           return;
         }
         t.st.set(memplan::path(Count::grad_accum), t.s().batch.grad_accum, as_count(n), n);
       }},
      {{"accelerator"}, [](const Node& n, Pl& t) {
         if (n.kind != Node::Kind::scalar) return;
         const std::string a = lower(as_text(n));
         if (a == "tpu" || a == "mps" || a == "xla" || a == "hpu")
           t.st.unmodelled(n, fmt::format("{} devices are not modelled: estimated as CUDA GPUs", a));
         else if (a == "cpu")
           t.st.unmodelled(n, "trainer.accelerator: cpu trains on the host; the estimate is for the GPU given with --gpu "
                              "(use --device cpu to estimate host memory)");
       }},
      {{"plugins"}, [](const Node& n, Pl& t) {
         if (truthy(n))
           t.st.unmodelled(n, "Trainer plugins (a precision plugin such as BitsandbytesPrecision, a custom environment) are "
                              "not read: the estimate follows trainer.precision and trainer.strategy");
       }},
      {{"max_epochs", "min_epochs", "max_steps", "min_steps", "max_time", "limit_train_batches", "limit_val_batches",
        "limit_test_batches", "limit_predict_batches", "overfit_batches", "val_check_interval", "check_val_every_n_epoch",
        "num_sanity_val_steps", "log_every_n_steps", "enable_checkpointing", "enable_progress_bar", "enable_model_summary",
        "gradient_clip_val", "gradient_clip_algorithm", "deterministic", "benchmark", "inference_mode",
        "use_distributed_sampler", "profiler", "detect_anomaly", "barebones", "sync_batchnorm",
        "reload_dataloaders_every_n_epochs", "default_root_dir", "callbacks", "logger", "fast_dev_run",
        "enable_autolog_hparams", "model_registry"},
       [](const Node&, Pl&) {}},
  };
  return k;
}

// Keys a LightningModule commonly takes to name its pretrained model.
constexpr const char* kModelIdKeys[] = {"model_name_or_path", "pretrained_model_name_or_path", "pretrained_model_name",
                                        "model_name", "model_id", "base_model"};

void read_model(const Node& n, Pl& t) {
  if (n.kind == Node::Kind::scalar) return t.st.use_model(as_text(n), n);  // memplan's `model: NAME`
  if (n.kind != Node::Kind::map) return;
  if (const Node* p = n.find("preset")) return t.st.use_model(as_text(*p), *p);  // memplan's model: {preset: ...}
  if (const Node* h = n.find("hf_config")) return t.st.use_model(t.st.beside(as_text(*h)).string(), *h);
  const Node* args = n.find("init_args");
  for (const Node* m : {args, &n}) {
    if (!m || m->kind != Node::Kind::map) continue;
    for (const char* key : kModelIdKeys)
      if (const Node* id = m->find(key); id && id->kind == Node::Kind::scalar) return t.st.use_model(as_text(*id), *id);
  }
  if (t.st.out.has_model) return;  // the memplan block named it
  const Node* cls = n.find("class_path");
  t.st.out.no_model = Warning{
      n.where,
      cls ? fmt::format("model: is the LightningModule {} and names no architecture memplan can read", as_text(*cls))
          : "model: holds the LightningModule's arguments and names no architecture memplan can read",
      fmt::format("pass --model PRESET|HF_ID|config.json, or give the module a {} argument", kModelIdKeys[0])};
}

void read_data(const Node& n, Pl& t) {
  if (n.kind != Node::Kind::map) return;
  const Node* args = n.find("init_args");
  const Node* m = args && args->kind == Node::Kind::map ? args : &n;
  const char* why = "LightningDataModule argument, a convention and not a Lightning key";
  if (const Node* b = m->find("batch_size")) {
    const bool same = t.from_block && t.st.out.origin.fields.count(memplan::path(Count::micro_batch)) && as_count(*b) == t.s().batch.micro_batch;
    t.st.set(memplan::path(Count::micro_batch), t.s().batch.micro_batch, as_count(*b), *b);
    if (!same)
      t.st.out.warnings.push_back({b->where, fmt::format("{} is read as the per-device micro-batch ({})", b->path, why),
                                   "pass --micro-batch N if your module batches otherwise"});
  }
  for (const char* key : {"max_seq_length", "max_seq_len", "seq_len", "seq_length", "block_size", "max_length"}) {
    const Node* s = m->find(key);
    if (!s || s->kind != Node::Kind::scalar) continue;
    const bool same = t.from_block && t.st.out.origin.fields.count(memplan::path(Count::seq_len)) && as_count(*s) == t.s().batch.seq_len;
    t.st.set(memplan::path(Count::seq_len), t.s().batch.seq_len, as_count(*s), *s);
    if (!same)
      t.st.out.warnings.push_back({s->where, fmt::format("{} is read as the sequence length ({})", s->path, why),
                                   "pass --seq-len N if the batches are otherwise long"});
    break;
  }
}

void read_optimizer(const Node& n, Pl& t) {
  const Node* cls = n.kind == Node::Kind::map ? n.find("class_path") : n.kind == Node::Kind::scalar ? &n : nullptr;
  if (!cls) return;  // flat optimizer arguments of the CLI's fixed optimizer class
  const std::string name = class_name(as_text(*cls));
  const Node* args = n.kind == Node::Kind::map ? n.find("init_args") : nullptr;
  OptimizerKind o;
  if (name == "AdamW") o = OptimizerKind::adamw;
  else if (name == "Adam") o = OptimizerKind::adam;
  else if (name == "SGD") {
    const Node* m = args ? args->find("momentum") : nullptr;
    o = m && as_number(*m) > 0 ? OptimizerKind::sgd_momentum : OptimizerKind::sgd;
  } else if (name == "Adafactor") o = OptimizerKind::adafactor;
  else if (name == "AdamW8bit" || name == "Adam8bit") o = OptimizerKind::adamw_8bit;
  else if (name == "PagedAdamW8bit") o = OptimizerKind::paged_adamw_8bit;
  else if (name == "PagedAdamW" || name == "PagedAdamW32bit") o = OptimizerKind::paged_adamw;
  else if (name == "Lion") o = OptimizerKind::lion;
  else if (name == "ZeroRedundancyOptimizer") {
    // torch.distributed.optim.ZeroRedundancyOptimizer(params, optimizer_class=..., **defaults):
    // its optimizer_class, with the other arguments, steps each rank's share of the parameters.
    t.st.set(memplan::path(Setting::zero_redundancy_optimizer), t.s().parallel.zero_redundancy_optimizer, true, *cls);
    const Node* inner = args && args->kind == Node::Kind::map ? args->find("optimizer_class") : nullptr;
    if (!inner)
      throw InputError(cls->where, "ZeroRedundancyOptimizer without init_args.optimizer_class",
                       "e.g. init_args: {optimizer_class: torch.optim.AdamW, lr: 1e-4}");
    Node wrapped = *args;
    wrapped.entries.clear();
    for (const auto& [k, v] : args->entries)
      if (k != "optimizer_class") wrapped.entries.emplace_back(k, v);
    Node as_class = n;
    as_class.entries.clear();
    as_class.entries.emplace_back("class_path", *inner);
    as_class.entries.emplace_back("init_args", wrapped);
    return read_optimizer(as_class, t);
  } else {
    o = OptimizerKind::adamw;
    t.st.unmodelled(*cls, "an optimizer memplan does not know: estimated as AdamW (two states per parameter)");
  }
  t.st.set(memplan::path(Choice::optimizer), t.s().optimizer, o, *cls);
  if (!args || args->kind != Node::Kind::map) return;
  Runtime& r = t.s().runtime;
  if (const Node* fused = args->find("fused"); fused && as_bool(*fused))
    t.st.set(memplan::path(Choice::optimizer_impl), r.optimizer_impl, OptimizerImpl::fused, *fused);
  else if (const Node* fe = args->find("foreach"))
    t.st.set(memplan::path(Choice::optimizer_impl), r.optimizer_impl, as_bool(*fe) ? OptimizerImpl::foreach : OptimizerImpl::for_loop, *fe);
}

const Table& root_keys() {
  static const Table k = {
      {{"trainer"}, [](const Node& n, Pl& t) { read_section(n, {&trainer_keys()}, t, &t.st.out.warnings); }},
      {{"model"}, read_model},
      {{"data"}, read_data},
      {{"optimizer"}, read_optimizer},
      {{"seed_everything", "lr_scheduler", "ckpt_path", "config", "print_config"}, [](const Node&, Pl&) {}},
  };
  return k;
}

// The regime Lightning runs for trainer.precision under the strategy: DeepSpeedPrecision keeps
// fp32 master weights for every 16-bit setting; FSDPPrecision's "-mixed" shards fp32 parameters
// and autocasts, "-true" converts the module (_check_and_init_precision,
// src/lightning/pytorch/trainer/connectors/accelerator_connector.py @ 2.6.5).
void resolve_precision(Pl& t) {
  TrainingSetup& s = t.s();
  const bool deepspeed = t.kind == StrategyKind::deepspeed;
  std::string p = "32-true";  // Trainer(precision=None) -> "32-true"
  if (t.precision) p = lower(as_text(*t.precision));
  // Legacy spellings (_convert_precision_to_unified_args, src/lightning/fabric/connector.py @ 2.6.5).
  if (p == "16") p = "16-mixed";
  else if (p == "bf16") p = "bf16-mixed";
  else if (p == "32") p = "32-true";
  else if (p == "64") p = "64-true";
  Precision v;
  bool fp8 = false;
  if (p == "32-true") v = Precision::fp32;
  else if (p == "16-mixed") v = deepspeed ? Precision::mixed_fp16 : Precision::amp_fp16;
  else if (p == "bf16-mixed") v = deepspeed ? Precision::mixed_bf16 : Precision::amp_bf16;
  else if (p == "16-true") v = deepspeed ? Precision::mixed_fp16 : Precision::fp16;
  else if (p == "bf16-true") v = deepspeed ? Precision::mixed_bf16 : Precision::bf16;
  else if (p == "transformer-engine" || p == "transformer-engine-float16") {
    // TransformerEnginePrecision: the module in bf16 (fp16), fp8 inside Transformer Engine layers.
    v = p == "transformer-engine" ? Precision::bf16 : Precision::fp16;
    fp8 = true;
  } else if (p == "64-true") {
    throw InputError(t.precision->where, "64-bit training is not modelled (memplan has no fp64 regime)",
                     "use 32-true, bf16-mixed or 16-mixed");
  } else {
    throw InputError(t.precision->where, fmt::format("unknown precision '{}'", as_text(*t.precision)),
                     "expected one of: 32-true, 16-mixed, bf16-mixed, 16-true, bf16-true, transformer-engine, "
                     "transformer-engine-float16 (or the legacy 16, bf16, 32)");
  }
  if (t.precision) {
    t.st.set(memplan::path(Choice::precision), s.precision, v, *t.precision);
    if (fp8) t.st.set(Switch::fp8, true, *t.precision);
  } else {
    s.precision = v;
    t.st.by_default(memplan::path(Choice::precision), fmt::format("Lightning default: Trainer(precision=None) = \"32-true\" ({} "
                                             "accelerator_connector.py)", kPl));
  }
}

void resolve_parallel(Pl& t) {
  TrainingSetup& s = t.s();
  Parallelism& p = s.parallel;
  if (t.devices || !t.from_block) {
    p.num_gpus = count_product({{t.per_node, t.devices}, {t.nodes, t.nodes_node}}, kMaxGpus,
                               "trainer.devices x trainer.num_nodes (the GPU count)", Where::at_file(t.st.path));
    if (t.devices) t.st.note(memplan::path(Count::num_gpus), *t.devices);
  }
  if (t.nodes > 1) t.st.set(memplan::path(Count::gpus_per_node), p.gpus_per_node, t.per_node, *t.nodes_node);
  if (t.devices_auto && !(t.from_block && !t.devices)) {
    const Where w = t.devices ? t.devices->where : Where::at_file(t.st.path);
    t.st.defer(memplan::path(Count::num_gpus), w,
               "trainer.devices is \"auto\" (Lightning's default): every visible GPU, a count the file does not hold; "
               "estimating 1 per node",
               "pass --gpus N (devices x num_nodes)");
  }
  // The strategy (_choose_strategy: "auto" is one device, or DDP over several).
  // The strategy's own key, unless one of its init_args said it more precisely.
  const Node* at = t.strategy;
  auto note = [&](const char* field) {
    if (at && !t.st.out.origin.fields.count(field)) t.st.note(field, *at);
  };
  switch (t.kind) {
    case StrategyKind::deepspeed:
      p.zero_stage = t.zero;
      note(memplan::path(Count::zero_stage));
      p.fsdp = FsdpMode::none;
      p.offload = offload_union(t.offload_optimizer ? Offload::optimizer : Offload::none, t.offload_params ? Offload::params : Offload::none);
      note(memplan::path(Choice::offload));
      // DeepSpeedStrategy's own defaults (deepspeed.py @ 2.6.5 __init__), not DeepSpeed's.
      p.reduce_bucket_elems = t.reduce_bucket;
      p.allgather_bucket_elems = t.allgather_bucket;
      p.overlap_comm = t.overlap_comm;
      for (auto [node, field] : {std::pair{t.reduce_node, memplan::path(Setting::reduce_bucket_elems)},
                                 {t.allgather_node, memplan::path(Setting::allgather_bucket_elems)}, {t.overlap_node, memplan::path(Setting::overlap_comm)}}) {
        if (node) t.st.note(field, *node);
        else t.st.by_default(field, fmt::format("Lightning DeepSpeedStrategy default (allgather/reduce_bucket_size 2e8, "
                                                "overlap_comm True; src/lightning/pytorch/strategies/deepspeed.py @ 2.6.5)"));
      }
      break;
    case StrategyKind::fsdp:
      p.zero_stage = 0;
      p.fsdp = t.fsdp;
      note(memplan::path(Choice::fsdp));
      if (t.fsdp == FsdpMode::hybrid_shard && t.nodes == 1) p.gpus_per_node = t.per_node;
      p.offload = t.fsdp_cpu_offload ? Offload::optimizer_and_params : Offload::none;
      note(memplan::path(Choice::offload));
      if (t.ckpt_policy) {
        // activation_checkpointing_policy names the layer classes to wrap; memplan assumes the decoder blocks.
        t.s().checkpointing = Checkpointing{};
        t.s().checkpointing.mode = CheckpointMode::full;
        t.st.note(memplan::path(Choice::checkpointing), *t.ckpt_policy);
      }
      break;
    case StrategyKind::model_parallel: {
      p.zero_stage = 0;
      p.fsdp = FsdpMode::full_shard;
      p.fsdp_version = 2;
      note(memplan::path(Choice::fsdp));
      note(memplan::path(Setting::fsdp_version));
      p.offload = Offload::none;
      const int64_t tp = t.mp_tensor > 0 ? t.mp_tensor : t.per_node;
      if (tp > 1 && !t.st.out.origin.fields.count(memplan::path(Count::tensor_parallel))) {
        p.tensor_parallel = tp;
        if (t.mp_tensor_node) t.st.note(memplan::path(Count::tensor_parallel), *t.mp_tensor_node);
        else note(memplan::path(Count::tensor_parallel));
      }
      break;
    }
    default:
      // DDP, one device or "auto": no sharding.
      p.zero_stage = 0;
      p.fsdp = FsdpMode::none;
      p.offload = Offload::none;
      // An explicit DDP strategy wraps the module in DistributedDataParallel on one device too
      // (DDPStrategy._setup_model, src/lightning/pytorch/strategies/ddp.py @ 2.6.5).
      if (t.kind == StrategyKind::ddp) {
        p.ddp = true;
        note(memplan::path(Setting::ddp));
      }
      if (at) {
        note(memplan::path(Count::zero_stage));
        note(memplan::path(Choice::fsdp));
      } else {
        t.st.by_default(memplan::path(Count::zero_stage), fmt::format("Lightning default: strategy \"auto\" is DDP over several devices "
                                                           "({} accelerator_connector.py _choose_strategy)", kPl));
      }
      break;
  }
}

}  // namespace

void read_lightning(const Node& file_root, ReadState& st) {
  // A config written before the subcommand (`main.py --config c.yaml fit`) nests under fit:.
  const Node* root = &file_root;
  if (const Node* fit = file_root.find("fit"); fit && fit->kind == Node::Kind::map && !file_root.find("trainer")) root = fit;
  Pl t(st);
  // memplan's own block first (a file `memplan plan --emit lightning` wrote).
  const std::string block = memplan_block(st.text);
  if (!block.empty()) {
    st.out = load_config_text(block, st.path, st.file.string(), "memplan");
    t.from_block = true;
  }
  if (!st.out.origin.fields.count(memplan::path(Choice::framework))) {
    st.s().runtime.framework = Framework::lightning;
    st.by_default(memplan::path(Choice::framework), "a LightningCLI config (trainer:)");
  }
  read_section(*root, {&root_keys()}, t, &st.out.warnings);
  if (!st.out.has_model && !st.out.no_model)
    st.out.no_model = Warning{Where::at_file(st.path), "this Lightning config names no model (Lightning configs hold the "
                                                       "Trainer's arguments; the architecture is in the user's LightningModule)",
                              "pass --model PRESET|HF_ID|config.json"};
  resolve_precision(t);
  resolve_parallel(t);
  if (!t.from_block) {
    if (!st.out.origin.fields.count(memplan::path(Count::micro_batch)))
      st.defer(memplan::path(Count::micro_batch), Where::at_file(st.path),
               "the micro-batch is not in a Lightning config (the DataLoader's batch size is the user's code); estimating 1",
               "pass --micro-batch N");
    if (!st.out.origin.fields.count(memplan::path(Count::seq_len)))
      st.defer(memplan::path(Count::seq_len), Where::at_file(st.path),
               fmt::format("the sequence length is not in a Lightning config (the user's data module decides it); "
                           "estimating {} tokens",
                           st.s().batch.seq_len),
               "pass --seq-len N");
    if (!st.out.origin.fields.count(memplan::path(Count::grad_accum)))
      st.by_default(memplan::path(Count::grad_accum), fmt::format("Lightning default: accumulate_grad_batches=1 ({} trainer.py)", kPl));
  }
}

}  // namespace memplan::profiles::detail
