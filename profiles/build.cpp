// Command-line flags -> TrainingSetup: the --config file first, then each given flag on top (the
// flag wins and becomes the field's origin), then defaults that depend on the model, then one
// validation whose first problem is reported at the line or flag it came from.
#include <cctype>
#include <climits>
#include <optional>
#include <cstdio>
#include <tuple>
#include <fstream>
#include <sstream>

#include "estimator/text.h"
#include "estimator/capability.h"
#include "estimator/runtime.h"
#include "profiles/detail.h"
#include "profiles/formats.h"
#include "profiles/hub.h"

namespace memplan::profiles {

// Host RAM from /proc/meminfo (0 when unreadable): the capacity of --device cpu.
int64_t host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

using detail::lower;

namespace {

// A choice of the registry (estimator/fields.h) from its flag, when given: one of its names, else
// "unknown <what> 'x'" at the flag with the names it takes.
void apply_choice_flag(const SetupInputs& in, Choice id, BuiltSetup& b) {
  const std::optional<std::string>& v = in.choice_flag(id);
  if (!v) return;
  const ChoiceField& f = field(id);
  if (!f.set(b.setup, *v))
    throw InputError(Where::at_flag(f.flag), fmt::format("unknown {} '{}'", f.what, clip(*v)), f.refusal_hint());
  b.origin.set(id, Where::at_flag(f.flag));
}

// A size flag's text needs its unit where the row takes no fraction: "12" was 12 bytes (a card
// that fits nothing, said with a straight face), and 12GB and 12GiB differ by 7%.
void require_unit(const std::string& text, const SizeField& row) {
  if (row.fraction) return;  // a bare number is a fraction of the card
  if (auto bare = bare_size_error(text, Where::at_flag(row.flag))) throw *bare;
}

std::optional<int64_t> capacity_flag(const SetupInputs& in) {
  const std::optional<std::string>& text = in.size_flag(Size::gpu_memory);
  const char* flag = field(Size::gpu_memory).flag;
  if (!text) return std::nullopt;
  require_unit(*text, field(Size::gpu_memory));
  const auto bytes = parse_size(*text);
  if (!bytes || *bytes <= 0)
    throw InputError(Where::at_flag(flag), fmt::format("cannot read '{}' as a size", clip(*text)),
                     "write it like 12GiB or 24GB");
  return bytes;
}

// What runs on the CPU target: torch's CPU kernels (SDPA has a fused CPU kernel), no flash-attn,
// no bitsandbytes 8-bit optimizers (bitsandbytes README @ 0.47.0: CPU 8-bit optimizers not
// supported), no DeepSpeed engine or NCCL.
std::shared_ptr<const Capabilities> cpu_capabilities() {
  static const std::shared_ptr<const Capabilities> caps = [] {
    Capabilities c;
    c.label = "CPU";
    c.backend = "cpu";
    c.collective = "none";
    c.flash_attention = c.bitsandbytes = c.deepspeed = c.deepspeed_offload = c.multi_gpu = Support::no;
    auto why = [&](Feature f, const char* w) { c.why[static_cast<size_t>(f)] = w; };
    why(Feature::flash_attention, "flash-attn has CUDA and ROCm kernels only");
    why(Feature::bitsandbytes, "bitsandbytes has no 8-bit optimizers on the CPU (README @ 0.47.0)");
    why(Feature::deepspeed, "memplan models the CPU target without DeepSpeed");
    why(Feature::deepspeed_offload, "offloading to the host is meaningless when the host is the target");
    why(Feature::multi_gpu, "one CPU process");
    c.source = "bitsandbytes README @ 0.47.0 accelerator table; flash-attn README @ v2.8.3 (CUDA, ROCm)";
    return std::make_shared<const Capabilities>(std::move(c));
  }();
  return caps;
}

// --host-memory: the RAM of one node.
std::optional<int64_t> host_memory_flag(const SetupInputs& in) {
  const std::optional<std::string>& text = in.size_flag(Size::host_memory);
  const char* flag = field(Size::host_memory).flag;
  if (!text) return std::nullopt;
  require_unit(*text, field(Size::host_memory));
  const auto bytes = parse_size(*text);
  if (!bytes)
    throw InputError(Where::at_flag(flag), fmt::format("cannot read '{}' as a size", clip(*text)),
                     "the RAM of one node, written like 512GiB or 1TB");
  if (*bytes <= 0)
    throw InputError(Where::at_flag(flag), fmt::format("must be above 0 (got '{}')", *text),
                     "the RAM of one node, e.g. --host-memory 512GiB; leave it out when unknown (offload plans then say "
                     "how much they need)");
  return bytes;
}

// --allocator-cap / hardware.allocator_cap: torch.cuda.set_per_process_memory_fraction. PyTorch
// takes a fraction of the device's total (c10/cuda/CUDACachingAllocator.cpp setMemoryFraction:
// allowed_memory_maximum = fraction x cudaMemGetInfo's total; a segment that would take reserved
// memory past it fails like a cudaMalloc, after the cache is freed and the request retried), so a
// number up to 1 is that fraction of the card; anything else is a size. The allocator holds at most
// the cap and the context lives outside it, so the memory the process can use is the cap plus the
// context (the card's, if less): that is the capacity every verdict holds against.
void apply_allocator_cap(const SetupInputs& in, const LoadedConfig& cfg, BuiltSetup& b) {
  const std::optional<std::string>& flag = in.size_flag(Size::allocator_cap);
  const std::optional<std::string>& text = flag ? flag : cfg.allocator_cap;
  if (!text) return;
  const Where where = flag ? Where::at_flag(field(Size::allocator_cap).flag) : cfg.origin.of(Size::allocator_cap);
  const char* hint = "a size (11GiB, 12GB) or a fraction of the card's memory as set_per_process_memory_fraction takes it (0.5)";
  TrainingSetup& s = b.setup;
  if (s.device.kind != DeviceKind::cuda)
    throw InputError(where, "an allocator cap applies to a CUDA device (the caching allocator's set_per_process_memory_fraction)",
                     "leave it out with --device cpu");
  // A bare number is a fraction, as set_per_process_memory_fraction takes it (which refuses one
  // above 1); a size needs its unit.
  const bool bare = field(Size::allocator_cap).fraction && !text->empty() && text->find_first_not_of("0123456789.") == std::string::npos;
  DeviceSpec from = s.device;
  if (bare) {
    char* end = nullptr;
    const double fraction = std::strtod(text->c_str(), &end);
    if (!end || *end != '\0' || end == text->c_str())
      throw InputError(where, fmt::format("cannot read '{}' as an allocator cap", *text), hint);
    if (fraction > 1.0) {
      // The unit the size wants, said as every size's refusal says it (11811160064 is bytes, 11 GiB).
      const std::optional<InputError> bare = bare_size_error(*text, where);
      throw InputError(where, fmt::format("a bare number is a fraction of the card, at most 1 (got '{}')", *text),
                       fmt::format("{}; a fraction is 0 to 1, as set_per_process_memory_fraction takes it",
                                   bare ? bare->hint() : fmt::format("a size needs its unit: {}GiB", *text)));
    }
    if (s.device.capacity_bytes <= 0)
      throw InputError(where, fmt::format("a fraction ('{}') needs the card's memory", *text),
                       "pass --gpu PRESET or --gpu-memory SIZE, or give the cap as a size (11GiB)");
    const double bytes = fraction * static_cast<double>(s.device.capacity_bytes);
    if (!(bytes >= 1)) throw InputError(where, fmt::format("the allocator cap must be above 0 (got '{}')", *text), hint);
    from.allocator_cap_fraction = fraction;
    from.allocator_cap_bytes = static_cast<int64_t>(bytes);
  } else {
    const auto bytes = parse_size(*text);
    if (!bytes || *bytes <= 0) throw InputError(where, fmt::format("cannot read '{}' as an allocator cap", *text), hint);
    from.allocator_cap_bytes = *bytes;
  }
  carry_allocator_cap(s.device, from);
  b.origin.set(Size::allocator_cap, where);
}

// A --gpu flag replaces the file's whole target (its gpu and gpu_memory); --gpu-memory replaces
// only the capacity; --device cpu measures against host RAM.
void apply_device(const SetupInputs& in, const LoadedConfig& cfg, BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  const std::optional<int64_t> flag_capacity = capacity_flag(in);
  if (!in.gpu && !flag_capacity && !cfg.gpu && !cfg.gpu_memory && s.device.family.empty())
    s.device = detail::gpu_device(std::nullopt, Where(), std::nullopt);  // no target: generic overheads
  if (in.gpu || flag_capacity) {
    const Where gpu_where = in.gpu ? Where::at_flag(field(Target::gpu).flag) : cfg.origin.of(Target::gpu);
    const auto gpu = in.gpu ? in.gpu : cfg.gpu;
    const auto capacity = flag_capacity ? flag_capacity : in.gpu ? std::nullopt : cfg.gpu_memory;
    s.device = detail::gpu_device(gpu, gpu_where, capacity);
    s.runtime.allocator_rounding = true;
    if (gpu) b.origin.set(Target::gpu, gpu_where);
    Where capacity_where = flag_capacity ? Where::at_flag(field(Size::gpu_memory).flag) : in.gpu ? gpu_where : cfg.origin.of(Size::gpu_memory);
    // The size as given, said back beside the bytes it means (12GB is 10^9 bytes each, 12GiB 2^30).
    if (const auto& text = in.size_flag(Size::gpu_memory); flag_capacity && text)
      capacity_where.key = fmt::format("{} {} = {} bytes", field(Size::gpu_memory).flag, *text, text::thousands(*flag_capacity));
    b.origin.set(Size::gpu_memory, capacity_where);
  }
  // The device kind: the flag's, else the file's hardware: device unless a --gpu flag replaced
  // the file's target.
  if (!in.device && (in.gpu || !cfg.device)) return;
  const std::string& kind = in.device ? *in.device : *cfg.device;
  const Where kind_where = in.device ? Where::at_flag(field(Target::device).flag) : cfg.origin.of(Target::device);
  const std::string d = lower(kind);
  const bool cuda_n = d.size() > 5 && d.rfind("cuda:", 0) == 0 &&
                      d.find_first_not_of("0123456789", 5) == std::string::npos;
  if (d == "cpu") {
    // The capacity: --gpu-memory's, else the memory a file for the CPU states (a plan made with
    // --device cpu --gpu-memory writes it; a card's memory in a file for the GPU does not count),
    // else this machine's RAM.
    const bool file_cpu = cfg.device && lower(*cfg.device) == "cpu";
    const std::optional<int64_t> file_capacity = file_cpu ? cfg.gpu_memory : std::nullopt;
    DeviceSpec cpu;
    cpu.name = "cpu";
    cpu.kind = DeviceKind::cpu;
    cpu.capacity_bytes = flag_capacity.value_or(file_capacity.value_or(host_memory_bytes()));
    cpu.caps = cpu_capabilities();
    s.device = cpu;
    // The target is this machine: its RAM is the node's host memory unless --host-memory says.
    if (!in.size_flag(Size::host_memory) && !b.origin.fields.count(memplan::path(Size::host_memory))) {
      s.parallel.host_memory_bytes = host_memory_bytes();
      b.origin.defaults[memplan::path(Size::host_memory)] = "this machine's RAM (/proc/meminfo MemTotal), the target of --device cpu";
    }
    s.runtime.allocator_rounding = false;  // the CPU allocator does not round like CUDA's caching allocator
    b.origin.set(Size::gpu_memory, flag_capacity  ? Where::at_flag(field(Size::gpu_memory).flag)
                                   : file_capacity ? cfg.origin.of(Size::gpu_memory)
                                                   : kind_where);
  } else if (d == "cuda" || cuda_n) {
    s.device.kind = DeviceKind::cuda;
  } else {
    throw InputError(kind_where, fmt::format("unknown device '{}'", kind), "expected one of: cpu, cuda, cuda:N");
  }
  b.origin.set(Target::device, kind_where);
}

void apply_finetune(const SetupInputs& in, BuiltSetup& b) {
  Provenance& o = b.origin;
  // The fine-tuning choices (the method, whose row sets the base's quantization too, then the
  // adapters' dtype).
  for (const ChoiceField& f : choice_fields())
    if (std::string(f.section) == "finetune") apply_choice_flag(in, f.id, b);
  for (const NumberField& n : number_fields()) {  // the registry's numbers with a flag (estimator/fields.h)
    if (!n.flag || !in.number_flag(n.id)) continue;
    n.set(b.setup, *in.number_flag(n.id));
    o.set(n.id, Where::at_flag(n.flag));
  }
  for (const ListField& l : list_fields()) {  // the registry's lists (--lora-targets q,k,v,o): comma lists
    if (!in.list_flag(l.id)) continue;
    l.set(b.setup, detail::split_list(*in.list_flag(l.id)));
    o.set(l.id, Where::at_flag(l.flag));
  }
}

void apply_runtime_flags(const SetupInputs& in, BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  Runtime& r = s.runtime;
  Provenance& o = b.origin;
  // The runtime's choices of the registry (estimator/fields.h): the framework, the optimizer kernel,
  // FSDP, the loss.
  for (const ChoiceField& f : choice_fields())
    if (f.runtime()) apply_choice_flag(in, f.id, b);
  for (const VersionField& f : version_fields()) {
    const std::optional<std::string>& v = in.version_flag(f.id);
    if (!v) continue;
    const auto [major, minor] = detail::read_version(f, *v, Where::at_flag(f.flag), fmt::format("the {} version", f.library));
    f.set(s, major, minor);
    o.set(f.id, Where::at_flag(f.flag));
  }
  // Below the config and the flags: the releases the job's Python has (SetupInputs::environment).
  bool torch_from_environment = false;
  for (const VersionField& f : version_fields()) {
    const auto& env = in.environment[static_cast<size_t>(f.id)];
    if (!env || in.version_flag(f.id) || o.given(f.id)) continue;
    if (env->version.empty()) {  // none found: memplan's default, and why
      o.defaults[f.path] = fmt::format("{}; {}", f.default_source, env->source);
      continue;
    }
    // "2.11.0+cu130", "1.13.0a0": the MAJOR.MINOR it begins with, as memplan.estimate() reads __version__.
    size_t n = 0;
    while (n < env->version.size() && (std::isdigit(static_cast<unsigned char>(env->version[n])) || env->version[n] == '.')) ++n;
    std::string release = env->version.substr(0, n);
    if (const size_t dot = release.find('.'); dot != std::string::npos && release.find('.', dot + 1) != std::string::npos)
      release.resize(release.find('.', dot + 1));
    const auto v = parse_version(release);
    if (!v || v->first < 1 || (f.max_major > 0 && v->first > f.max_major)) {
      o.defaults[f.path] = fmt::format("{}; {} ({}, a release memplan does not read)", f.default_source, env->source, env->version);
      continue;
    }
    f.set(s, v->first, v->second);
    o.defaults[f.path] = env->source;
    torch_from_environment = torch_from_environment || f.id == Version::torch;
  }
  // torch 1.x's Optimizer.zero_grad() defaults to set_to_none=False (gradients stay allocated).
  if ((in.version_flag(Version::torch) || torch_from_environment) && !o.given(Switch::zero_grad_set_to_none))
    r.zero_grad_set_to_none = r.torch_major >= 2;
  if (const auto host = host_memory_flag(in)) {
    s.parallel.host_memory_bytes = *host;
    o.set(Size::host_memory, Where::at_flag(field(Size::host_memory).flag));
  }
}

// DeepSpeed's bf16/fp16 is its mixed precision whatever dtype the model was loaded in: 16-bit
// weights and gradients, fp32 master weights and optimizer states (the ZeRO optimizers build fp32
// partitions from the 16-bit parameters: deepspeed/runtime/zero/stage_1_and_2.py @ v0.16.4 L401,
// stage3.py @ v0.16.4 L902-903; BF16_Optimizer without ZeRO). A pure 16-bit regime under the
// DeepSpeed engine is read as that; a flag that asked for it gets a warning saying so.
void apply_deepspeed_precision(BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  const bool engine = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  if (!engine || (s.precision != Precision::bf16 && s.precision != Precision::fp16)) return;
  const Precision was = s.precision;
  s.precision = was == Precision::bf16 ? Precision::mixed_bf16 : Precision::mixed_fp16;
  const Where w = b.origin.of(memplan::path(Choice::precision));
  b.origin.defaults[memplan::path(Choice::precision)] = "DeepSpeed's bf16/fp16 is mixed precision (fp32 master weights and states): "
                                   "deepspeed/runtime/zero/stage_1_and_2.py @ v0.16.4 L401";
  if (!w.flag.empty())
    b.warnings.push_back({w, fmt::format("DeepSpeed runs {} as its mixed precision (16-bit weights and gradients, fp32 master "
                                         "weights and optimizer states): estimating {}",
                                         to_string(was), to_string(s.precision)),
                          fmt::format("say --precision {} to make it explicit", to_string(s.precision))});
}

// What the setup asks for that its card cannot run (bf16 on a T4, flash attention on RDNA2,
// bitsandbytes on Apple MPS, ...): a warning at the line or flag that asked, an error (exit 2)
// under --strict.
void check_device_support(const SetupInputs& in, BuiltSetup& b) {
  for (const Problem& p : device_problems(b.setup)) {
    Where w = b.origin.of(p.field);
    if (in.strict) throw InputError(w, p.message + " (--strict)", p.hint);
    b.warnings.push_back({w, p.message, p.hint});
  }
}

// What one setting implies for another the user did not set, then the framework's defaults for
// the rest (estimator/runtime.h), each recorded with its source.
void apply_runtime_defaults(BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  Provenance& o = b.origin;
  // Liger's patches turn fused linear cross-entropy on by default (apply_liger_kernel_to_llama(
  // fused_linear_cross_entropy=True), HF Trainer's use_liger_kernel applies them all).
  if (s.runtime.liger && !o.given(Choice::loss)) {
    s.runtime.loss = LossImpl::fused_linear;
    o.defaults[memplan::path(Choice::loss)] =
        "Liger: apply_liger_kernel_to_*(fused_linear_cross_entropy=True) by default "
        "(src/liger_kernel/transformers/monkey_patch.py @ v0.5.10)";
  }
  for (const FrameworkDefault& d : apply_framework_defaults(s, [&](const std::string& f) { return o.given(f); }))
    o.defaults[d.field] = fmt::format("{} default: {}", to_string(s.runtime.framework), d.source);
}

// A DeepSpeed config's train_batch_size sets the batch the engine runs
// (deepspeed/runtime/config.py DeepSpeedConfig._set_batch_related_parameters and _batch_assertion,
// deepspeedai/DeepSpeed @ 007cca6a): with the micro-batch, accumulation = train_batch_size /
// (micro-batch x data-parallel ranks); with the accumulation, the micro-batch likewise; alone,
// accumulation 1 and the micro-batch its share; all three must agree (the engine asserts). A value
// a flag gives takes part like the file's.
void resolve_deepspeed_batch(const LoadedConfig& cfg, BuiltSetup& b) {
  if (cfg.kind != "deepspeed" || !cfg.global_batch) return;
  TrainingSetup& s = b.setup;
  const int64_t tbs = *cfg.global_batch;
  const Where at = cfg.origin.of(memplan::path(Setting::global_batch));
  const int64_t world = std::max<int64_t>(1, s.parallel.data_parallel());
  const bool has_mb = b.origin.fields.count(memplan::path(Count::micro_batch)) > 0;
  const bool has_gas = b.origin.fields.count(memplan::path(Count::grad_accum)) > 0;
  // A stated count below 1 is validation's to report, at its key (nothing is derived from it).
  if ((has_mb && s.batch.micro_batch < 1) || (has_gas && s.batch.grad_accum < 1)) return;
  const std::string ranks = fmt::format("{} data-parallel rank{}", world, world == 1 ? "" : "s");
  const char* const assertion =
      "DeepSpeed asserts train_batch_size == train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel "
      "ranks: change one of them, or drop train_batch_size";
  if (has_mb && has_gas) {
    // Each factor is a count (validation caps them at 10^9, the ranks at 10^6): the product in 128 bits.
    const __int128 product = static_cast<__int128>(s.batch.micro_batch) * s.batch.grad_accum * world;
    if (product != tbs)
      throw InputError(at, fmt::format("train_batch_size {} is not micro-batch {} x accumulation {} x {}{}", tbs, s.batch.micro_batch,
                                       s.batch.grad_accum, ranks,
                                       product <= INT64_MAX ? fmt::format(" = {}", static_cast<int64_t>(product)) : std::string()),
                       assertion);
    return;
  }
  auto share = [&](int64_t per, const char* what) {
    if (static_cast<__int128>(per) * world > tbs || tbs % (per * world) != 0)
      throw InputError(at, fmt::format("train_batch_size {} is not a multiple of {} {} x {}", tbs, what, per, ranks), assertion);
    return tbs / (per * world);
  };
  if (has_mb) {
    s.batch.grad_accum = share(s.batch.micro_batch, "micro-batch");
    b.origin.defaults[memplan::path(Count::grad_accum)] = fmt::format("train_batch_size {} / (micro-batch {} x {}) (DeepSpeed's _set_batch_related_parameters)", tbs,
                                                        s.batch.micro_batch, ranks);
  } else if (has_gas) {
    s.batch.micro_batch = share(s.batch.grad_accum, "accumulation");
    b.origin.defaults[memplan::path(Count::micro_batch)] = fmt::format("train_batch_size {} / (accumulation {} x {}) (DeepSpeed's _set_batch_related_parameters)",
                                                         tbs, s.batch.grad_accum, ranks);
  } else {
    s.batch.grad_accum = 1;
    s.batch.micro_batch = share(1, "accumulation");
    b.origin.defaults[memplan::path(Count::micro_batch)] = fmt::format("train_batch_size {} / {}, accumulation 1 (DeepSpeed's _set_batch_related_parameters)", tbs, ranks);
    b.origin.defaults[memplan::path(Count::grad_accum)] = "1: train_batch_size without a micro-batch or accumulation (DeepSpeed's _set_batch_related_parameters)";
  }
}

// LitGPT derives the accumulation from train.global_batch_size once it knows the devices
// (TrainArgs.gradient_accumulation_iters, litgpt/args.py @ v0.5.13: global // (devices x num_nodes)
// // micro_batch_size): with --gpus or --micro-batch the file's global batch is spread again.
void resolve_litgpt_batch(const SetupInputs& in, const LoadedConfig& cfg, BuiltSetup& b) {
  const bool gpus = in.count_flag(Count::num_gpus).has_value(), micro_batch = in.count_flag(Count::micro_batch).has_value();
  // The checkpointing the tool decides by the device count, for the count --gpus gives.
  if (cfg.checkpointing_by_devices && gpus && !in.choice_flag(Choice::checkpointing)) {
    const bool several = b.setup.parallel.num_gpus > 1;
    b.setup.checkpointing = several ? cfg.checkpointing_by_devices->several : cfg.checkpointing_by_devices->one;
    b.origin.defaults[memplan::path(Choice::checkpointing)] = fmt::format("{} ({} GPU{} from --gpus)", several ? cfg.checkpointing_by_devices->why_several
                                                                                          : cfg.checkpointing_by_devices->why_one,
                                                     b.setup.parallel.num_gpus, several ? "s" : "");
  }
  if (cfg.kind != "litgpt" || !cfg.global_batch || in.count_flag(Count::grad_accum) || (!gpus && !micro_batch)) return;
  TrainingSetup& s = b.setup;
  const int64_t world = std::max<int64_t>(1, s.parallel.num_gpus);
  const int64_t accum = *cfg.global_batch / world / std::max<int64_t>(1, s.batch.micro_batch);
  if (accum < 1)
    throw InputError(Where::at_flag(field(gpus ? Count::num_gpus : Count::micro_batch).flag),
                     fmt::format("train.global_batch_size {} over {} device(s) leaves less than one micro-batch of {} per step (LitGPT "
                                 "asserts gradient_accumulation_iters > 0)",
                                 *cfg.global_batch, world, s.batch.micro_batch),
                     "lower --gpus or --micro-batch, or raise train.global_batch_size");
  s.batch.grad_accum = accum;
  b.origin.defaults[memplan::path(Count::grad_accum)] = fmt::format("train.global_batch_size {} // {} device(s) // micro-batch {} (LitGPT "
                                                      "TrainArgs.gradient_accumulation_iters, litgpt/args.py @ v0.5.13)",
                                                      *cfg.global_batch, world, s.batch.micro_batch);
}

// The yes/no switches of the registry (estimator/fields.h), each from its flag when given.
void apply_switch_flags(const SetupInputs& in, BuiltSetup& b) {
  for (const SwitchField& f : switch_fields()) {
    const std::optional<bool>& v = in.switch_flag(f.id);
    if (!v) continue;
    f.set(b.setup, *v);
    b.origin.set(f.id, Where::at_flag(*v ? std::string(f.flag) : f.negation()));  // as the user spelt it
  }
}

void apply_training_flags(const SetupInputs& in, BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  Provenance& o = b.origin;
  // The counts of the registry (estimator/fields.h), each from its flag when given.
  for (const CountField& f : count_fields()) {
    const std::optional<int64_t>& v = in.count_flag(f.id);
    if (!v) continue;
    // The ZeRO stage is an int: a value beyond it is refused here with the words validate() uses.
    if (f.read == CountRead::stage && (*v < INT_MIN || *v > INT_MAX)) {
      const Problem p = *zero_stage_problem(*v);
      throw InputError(Where::at_flag(f.flag), p.message, p.hint);
    }
    f.set(s, *v);
    o.set(f.id, Where::at_flag(f.flag));
  }
  // The training's choices of the registry but the fine-tuning ones (apply_finetune).
  for (const ChoiceField& f : choice_fields())
    if (!f.runtime() && std::string(f.section) != "finetune") apply_choice_flag(in, f.id, b);
}

// Axolotl's bf16: auto on a GPU without bf16: its fp16 counterpart (resolve_dtype turns fp16 on).
void resolve_device_precision(const SetupInputs& in, const LoadedConfig& cfg, BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  if (!cfg.precision_follows_device || in.choice_flag(Choice::precision)) return;
  // The decision goes into the provenance: the key's position when the file wrote bf16: auto, the
  // default's text when it left it out.
  auto say = [&](const std::string& text) {
    if (const auto it = b.origin.fields.find(memplan::path(Choice::precision)); it != b.origin.fields.end()) it->second.key = text;
    else b.origin.defaults[memplan::path(Choice::precision)] = text + "; " + b.origin.defaults[memplan::path(Choice::precision)];
  };
  const bool cuda = s.device.kind == DeviceKind::cuda;
  if (!cuda || s.device.bf16) {
    const std::string where = s.device.family == "generic" ? "no GPU model given: bf16 assumed"
                                  : fmt::format("{} has bf16", s.device.name);
    say(fmt::format("bf16: auto -> {} ({})", to_string(s.precision), where));
    return;
  }
  switch (s.precision) {
    case Precision::bf16: s.precision = Precision::fp16; break;
    case Precision::amp_bf16: s.precision = Precision::amp_fp16; break;
    case Precision::mixed_bf16: s.precision = Precision::mixed_fp16; break;
    default: break;
  }
  say(fmt::format("bf16: auto -> {} ({} has no bf16)", to_string(s.precision), s.device.name));
}

// transformers 5's from_pretrained loads the checkpoint's dtype by default (dtype="auto";
// src/transformers/modeling_utils.py PreTrainedModel.from_pretrained @ v5.0.0, where 4.x loaded
// fp32): a TrainingArguments file without a dtype then trains 16-bit weights, gradients and
// optimizer states (the Trainer's bf16/fp16 autocast runs over them). Said where the precision
// comes from, with how to change it.
void resolve_load_dtype(const SetupInputs& in, const LoadedConfig& cfg, BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  // Before 5.0 the reader's text says it: transformers 4.x from_pretrained loads fp32 without dtype.
  if (!cfg.load_dtype_default || in.choice_flag(Choice::precision) || !s.runtime.transformers_at_least(5, 0)) return;
  const std::string& dt = s.model.checkpoint_dtype;
  const std::string version = fmt::format("transformers {}.{}", s.runtime.transformers_major, s.runtime.transformers_minor);
  std::string text;
  if (dt == "bfloat16" || dt == "float16") {
    s.precision = dt == "bfloat16" ? Precision::bf16 : Precision::fp16;
    text = fmt::format("{}: from_pretrained's dtype=\"auto\" loads the checkpoint's {} (the model's config.json): 16-bit "
                       "weights, gradients and optimizer states; torch_dtype: float32 in the file (or --precision amp-bf16) "
                       "trains fp32 weights under autocast",
                       version, dt);
  } else {
    text = fmt::format("{}: from_pretrained's dtype=\"auto\" loads the checkpoint's {} ({})", version,
                       dt.empty() ? std::string("dtype, not stated in the model's config.json: fp32 assumed") : dt,
                       to_string(s.precision));
  }
  b.origin.set_text(memplan::path(Choice::precision), text);
}

// A base loaded in the checkpoint's dtype (LoadedConfig::checkpoint_precision): the model's
// config.json decides, after --model.
void resolve_checkpoint_precision(const SetupInputs& in, const LoadedConfig& cfg, BuiltSetup& b) {
  if (!cfg.checkpoint_precision || in.choice_flag(Choice::precision)) return;
  TrainingSetup& s = b.setup;
  const std::string& dt = s.model.checkpoint_dtype;
  const bool half = dt == "bfloat16" || dt == "float16";
  s.precision = half ? (dt == "bfloat16" ? Precision::bf16 : Precision::fp16) : cfg.checkpoint_precision->if_fp32;
  Where w = cfg.checkpoint_precision->where;
  w.key = fmt::format("{}: the checkpoint's {}{}", cfg.checkpoint_precision->text,
                      dt.empty() ? std::string("dtype, not stated in the model's config.json: fp32 assumed") : dt,
                      half ? "" : fmt::format(" ({})", to_string(s.precision)));
  b.origin.set(memplan::path(Choice::precision), w);
}

// DeepSpeed "auto" bucket sizes from the hidden size, as transformers' HfTrainerDeepSpeedConfig
// (integrations/deepspeed.py trainer_config_finalize) and accelerate fill them
// (src/accelerate/accelerator.py @ v1.14.0 L2314-2320).
void resolve_auto_buckets(const LoadedConfig& cfg, BuiltSetup& b) {
  TrainingSetup& s = b.setup;
  const int64_t h = s.model.hidden_size;
  if (h <= 0 || h > (int64_t{1} << 24)) return;
  const char* source = "HF Trainer / accelerate fill DeepSpeed \"auto\" from hidden_size (transformers "
                       "integrations/deepspeed.py trainer_config_finalize; accelerate src/accelerate/accelerator.py @ "
                       "v1.14.0 L2314-2320)";
  if (cfg.auto_reduce_bucket) {
    s.parallel.reduce_bucket_elems = h * h;
    b.origin.fields.erase(memplan::path(Setting::reduce_bucket_elems));
    b.origin.defaults[memplan::path(Setting::reduce_bucket_elems)] = fmt::format("\"auto\" = hidden_size^2 = {}: {}", h * h, source);
  }
  if (cfg.auto_prefetch_bucket) {
    s.parallel.stage3_prefetch_bucket_elems = static_cast<int64_t>(0.9 * static_cast<double>(h * h));
    b.origin.fields.erase(memplan::path(Setting::stage3_prefetch_bucket_elems));
    b.origin.defaults[memplan::path(Setting::stage3_prefetch_bucket_elems)] =
        fmt::format("\"auto\" = int(0.9 hidden_size^2) = {}: {}", s.parallel.stage3_prefetch_bucket_elems, source);
  }
}

// True when a flag sets `field` (the fields a file may leave to the command line).
bool set_by_flag(const SetupInputs& in, const std::string& field) {
  if (const CountField* c = count_at(field)) return in.count_flag(c->id).has_value();
  for (const ChoiceField& c : choice_fields())
    if (field == c.path) return in.choice_flag(c.id).has_value();
  return false;
}

}  // namespace

BuiltSetup build_setup(const SetupInputs& in) {
  if (!in.config) return build_setup(in, LoadedConfig{});
  std::optional<hub::NoFetchScope> no_fetch;  // --model replaces the file's model: its Hub id is not fetched
  if (in.model) no_fetch.emplace();
  LoadedConfig cfg = load_config(*in.config, in.format.value_or(""));
  no_fetch.reset();
  return build_setup(in, cfg);
}

BuiltSetup build_setup(const SetupInputs& in, const LoadedConfig& cfg) {
  BuiltSetup b;
  if (in.config) b.config_path = *in.config;
  b.config_format = cfg.kind;
  b.warnings = cfg.warnings;
  for (const LoadedConfig::Deferred& d : cfg.deferred)
    if (!set_by_flag(in, d.field)) b.warnings.push_back(d.warning);
  // --strict: what a reader could only warn about (a key it cannot model, a near-miss key, a
  // DeepSpeed "auto", a value the file leaves to the launcher) is an error.
  if (in.strict && !b.warnings.empty()) {
    const Warning& w = b.warnings.front();
    throw InputError(w.where, w.message + " (--strict)", w.hint);
  }
  b.setup = cfg.setup;
  b.origin = cfg.origin;
  b.global_batch = cfg.global_batch;
  TrainingSetup& s = b.setup;
  if (in.model) {
    s.model = load_model(*in.model, Where::at_flag("--model"), &b.warnings);
    detail::set_model_origin(b.origin, Where::at_flag("--model"));
  } else if (cfg.model_error) {
    throw *cfg.model_error;
  } else if (!cfg.has_model) {
    if (cfg.no_model) throw InputError(cfg.no_model->where, cfg.no_model->message, cfg.no_model->hint);
    const auto format = detail::parse_format(cfg.kind);
    if (format && *format != detail::ConfigFormat::memplan_yaml && *format != detail::ConfigFormat::deepspeed_json)
      throw InputError(in.config ? Where::at_file(*in.config) : Where{},
                       fmt::format("no model given: this {} does not name the model it trains", detail::format_title(*format)),
                       "pass --model PRESET|HF_ID|config.json (memplan models lists the presets), or add a memplan "
                       "`model: NAME` key to the file");
    throw InputError(Where{}, "no model given",
                     "pass --model PRESET|config.json or set model: in the config (memplan models lists the presets)");
  }
  apply_device(in, cfg, b);
  apply_allocator_cap(in, cfg, b);
  apply_training_flags(in, b);
  apply_switch_flags(in, b);
  resolve_deepspeed_batch(cfg, b);
  resolve_litgpt_batch(in, cfg, b);
  resolve_device_precision(in, cfg, b);
  resolve_auto_buckets(cfg, b);
  apply_finetune(in, b);
  apply_runtime_flags(in, b);
  resolve_load_dtype(in, cfg, b);
  resolve_checkpoint_precision(in, cfg, b);
  // Fine-tuning without a stated precision gets its usual recipe: QLoRA trains under bf16
  // autocast over fp32 non-quantized weights (PEFT prepare_model_for_kbit_training + bf16=True),
  // LoRA on a base loaded in bfloat16 (fp32 adapters).
  // prepare_model_for_kbit_training also turns gradient checkpointing on by default. Adapters on
  // a pre-quantized checkpoint (GPTQ, AWQ, bitsandbytes, ...) follow the same recipe.
  const bool kbit = s.finetune.mode == FinetuneMode::qlora || (s.finetune.mode == FinetuneMode::lora && s.model.quantized.any());
  // A value a config format's reader took from its tool's defaults counts as stated (given()),
  // e.g. torchtune's enable_activation_checkpointing=False.
  if (!b.origin.given(memplan::path(Choice::checkpointing)) && kbit) s.checkpointing.mode = CheckpointMode::full;
  if (!b.origin.given(memplan::path(Choice::precision)) && s.finetune.mode != FinetuneMode::full) {
    s.precision = kbit ? Precision::amp_bf16 : Precision::bf16;
    if (!s.device.bf16 && s.device.kind == DeviceKind::cuda) s.precision = kbit ? Precision::amp_fp16 : Precision::fp16;
  }
  apply_runtime_defaults(b);
  apply_deepspeed_precision(b);
  if (in.calibration) {
    b.calibration = load_calibration(*in.calibration);
    b.origin.set(Target::calibration, Where::at_flag(field(Target::calibration).flag));
    // Context and allocator figures belong to the card they were measured on; applied elsewhere
    // they still apply (check skips them), with a warning.
    const bool preset = s.device.kind == DeviceKind::cuda && s.device.name != "unspecified" && s.device.name != "custom";
    if (preset && !calibration_applies(*b.calibration, s.device))
      b.warnings.push_back({Where::at_file(*in.calibration),
                            fmt::format("calibration profile made on {} applied to {}", clip(b.calibration->device), s.device.name),
                            fmt::format("its context and allocator figures are that device's: run memplan calibrate on a {}, "
                                        "or leave out --calibration",
                                        s.device.name)});
  }
  // A sequence longer than a learned position table cannot run; 512 is the default otherwise.
  const int64_t positions = s.model.max_position_embeddings;
  if (!b.origin.given(memplan::path(Count::seq_len)) && positions > 0 && positions < s.batch.seq_len) s.batch.seq_len = positions;
  // every:K's K is stated with the mode (--checkpointing every:4, checkpoint_every: 4, a tool's
  // every-K policy): where the mode came from.
  if (s.checkpointing.mode == CheckpointMode::every && !b.origin.given(Setting::every_k))
    if (const auto it = b.origin.fields.find(memplan::path(Choice::checkpointing)); it != b.origin.fields.end())
      b.origin.set(Setting::every_k, it->second);
  detail::throw_first_problem(s, b.origin, "", Where{});
  check_device_support(in, b);
  return b;
}

}  // namespace memplan::profiles
