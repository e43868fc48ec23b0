// memplan gpus, memplan models, memplan explain: the bundled presets, and each term's formula
// and source (for a given setup, with its per-layer table of saved tensors).
#include <fmt/format.h>

#include <ostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/python_env.h"
#include "estimator/model.h"

namespace memplan::cli {
namespace {

// "yes", "part" (a preview or experimental backend), "no".
const char* short_support(Support s) { return s == Support::yes ? "yes" : s == Support::partial ? "part" : "no"; }

nlohmann::json capabilities_json(const Capabilities& k) {
  nlohmann::json why = nlohmann::json::object();
  for (int i = 0; i < static_cast<int>(Feature::kCount); ++i)
    if (!k.why[static_cast<size_t>(i)].empty()) why[to_string(static_cast<Feature>(i))] = k.why[static_cast<size_t>(i)];
  return {{"label", k.label},
          {"backend", k.backend},
          {"flash_attention", to_string(k.flash_attention)},
          {"sdpa_fused", to_string(k.sdpa_fused)},
          {"bitsandbytes", to_string(k.bitsandbytes)},
          {"deepspeed", to_string(k.deepspeed)},
          {"deepspeed_offload", to_string(k.deepspeed_offload)},
          {"multi_gpu", k.collective},
          {"why", why},
          {"source", k.source}};
}

int run_gpus(Io io, const OutputFlags& o) {
  const profiles::GpuCatalog& c = profiles::gpu_catalog();
  if (o.format() != Format::table) {
    nlohmann::json doc = {{"schema", "memplan.gpus/v1"}, {"gpus", nlohmann::json::array()}};
    for (const profiles::GpuProfile* gp : c.all()) {
      const profiles::GpuProfile& g = *gp;
      doc["gpus"].push_back({{"name", g.name},
                             {"aliases", g.aliases},
                             {"vendor", g.vendor},
                             {"family", g.family},
                             {"memory_bytes", g.memory_bytes},
                             {"memory_basis", g.memory_basis.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.memory_basis)},
                             {"usable_bytes", g.usable_bytes()},
                             {"unified_memory", g.unified_memory},
                             {"bf16", g.bf16},
                             {"fp8", g.fp8},
                             {"peak_bf16_flops", g.peak_bf16_flops},
                             {"memory_bandwidth_bytes_per_s", g.memory_bandwidth_bytes_per_s},
                             {"interconnect_bytes_per_s", g.interconnect_bytes_per_s},
                             {"usable_fraction", g.usable_fraction},
                             {"source", g.source}});
      if (const profiles::GpuFamily* f = c.family(g.family); f && f->caps) doc["gpus"].back()["capabilities"] = capabilities_json(*f->caps);
    }
    emit(io.out, doc, o.format());
    return kExitOk;
  }
  io.out << fmt::format("{:<18} {:>11} {:<8} {:>11} {:<10} {:<4} {:<4} {:<5} {:<5} {:<4} {:<5} {:<5} {:<5} {:>9} {:>9}\n", "gpu", "memory",
                        "basis", "usable", "family", "bf16", "fp8", "flash", "sdpa", "bnb", "dspd", "offl", "multi", "bf16 TF/s", "HBM GB/s");
  for (const profiles::GpuProfile* gp : c.all()) {
    const profiles::GpuProfile& g = *gp;
    const profiles::GpuFamily* f = c.family(g.family);
    const Capabilities k = f && f->caps ? *f->caps : Capabilities{};
    io.out << fmt::format("{:<18} {:>11} {:<8} {:>11} {:<10} {:<4} {:<4} {:<5} {:<5} {:<4} {:<5} {:<5} {:<5} {:>9.0f} {:>9.0f}\n", g.name,
                          gib(g.memory_bytes), g.memory_basis == "printed-mib" ? "MiB" : g.memory_basis.empty() ? "?" : g.memory_basis,
                          gib(g.usable_bytes()), g.family, g.bf16 ? "yes" : "no", g.fp8 ? "yes" : "no",
                          short_support(k.flash_attention), short_support(k.sdpa_fused), short_support(k.bitsandbytes),
                          short_support(k.deepspeed), short_support(k.deepspeed_offload), k.collective.empty() ? "?" : k.collective,
                          g.peak_bf16_flops / 1e12, g.memory_bandwidth_bytes_per_s / 1e9);
  }
  io.out << "basis: where the memory comes from: measured (on the card, memplan's harness), printed (a byte total a tool\n"
            "printed), MiB (a MiB total a tool printed), nominal (the marketed size: the card shows 1-3% less; calibrate on it).\n";
  io.out << "flash: flash-attn 2; sdpa: SDPA's fused kernels (else its math path); bnb: bitsandbytes 8-bit optimizers and 4-bit\n"
            "bases; dspd: DeepSpeed; offl: its CPU offload; multi: collective backend. part: a preview memplan does not recommend.\n"
            "usable: the share one training process can use (Apple: Metal's recommendedMaxWorkingSetSize). --json has each reason and source.\n";
  io.out << fmt::format("{} presets; sources in {}/gpus.yaml\n", c.size(), profiles::data_dir());
  return kExitOk;
}

int run_models(Io io, const OutputFlags& o) {
  nlohmann::json doc = {{"schema", "memplan.models/v1"}, {"models", nlohmann::json::array()}};
  if (o.format() == Format::table)
    io.out << fmt::format("{:<20} {:<36} {:<11} {:>16} {:>6} {:>6} {:>9} {:>7}\n", "model", "hf repo", "type", "parameters",
                          "layers", "hidden", "heads/kv", "experts");
  for (const auto& p : profiles::model_presets()) {
    const ModelSpec m = profiles::load_model(p.path, Where::at_file(p.path));
    const int64_t n = count_model_parameters(m);
    const std::string experts = m.num_experts > 0 ? fmt::format("{}x{}", m.num_experts, m.experts_per_token) : "-";
    if (o.format() == Format::table)
      io.out << fmt::format("{:<20} {:<36} {:<11} {:>16} {:>6} {:>6} {:>9} {:>7}\n", p.name, p.hf_repo, m.model_type, thousands(n),
                            m.num_layers, m.hidden_size, fmt::format("{}/{}", m.num_attention_heads, m.num_key_value_heads), experts);
    else
      doc["models"].push_back({{"name", p.name},
                               {"hf_repo", p.hf_repo},
                               {"model_type", m.model_type},
                               {"parameters", n},
                               {"num_layers", m.num_layers},
                               {"hidden_size", m.hidden_size},
                               {"num_attention_heads", m.num_attention_heads},
                               {"num_key_value_heads", m.num_key_value_heads},
                               {"num_experts", m.num_experts}});
  }
  // Community re-uploads read as a preset when no cache holds their own config.json.
  doc["mirrors"] = nlohmann::json::array();
  if (o.format() == Format::table) io.out << fmt::format("\n{:<36} {:<22} {}\n", "mirror", "read as", "re-uploads");
  for (const auto& m : profiles::model_mirrors()) {
    const std::string as = m.dtype.empty() ? m.preset : fmt::format("{} ({})", m.preset, m.dtype);
    if (o.format() == Format::table) io.out << fmt::format("{:<36} {:<22} {}\n", m.id, as, m.upstream);
    else
      doc["mirrors"].push_back({{"id", m.id}, {"preset", m.preset}, {"upstream", m.upstream}, {"dtype", m.dtype}, {"named_by", m.named_by}});
  }
  if (o.format() != Format::table) emit(io.out, doc, o.format());
  else
    io.out << "pass a preset name or its HF repo id to --model; --model also takes a config.json or model directory.\n"
              "A mirror is read as its preset, with a warning, when no Hugging Face cache holds its config.json.\n";
  return kExitOk;
}

// What each term means, independent of a setup.
const char* term_meaning(Term t) {
  switch (t) {
    case Term::weights: return "the parameters as stored on the GPU (quantized bases at their bit width), plus autocast's half copies of matmul weights while forward/backward need them, and a DPO reference model's frozen copy";
    case Term::gradients: return "parameter gradients; with zero_grad(set_to_none) they appear during backward, with accumulation they stay";
    case Term::master_weights: return "the fp32 copy DeepSpeed/Megatron mixed precision updates (K=12 in ZeRO's accounting)";
    case Term::optimizer_states: return "Adam's two moments, SGD momentum, Adafactor's factored second moment, 8-bit block-wise states";
    case Term::activations: return "tensors autograd saves for backward, per layer and per saved tensor (see the per-layer table)";
    case Term::logits_and_loss: return "logits, their fp32 upcast, log-probabilities and their gradients: usually the largest spike of the step";
    case Term::transient: return "activation gradients at the backward frontier, kernel temporaries, optimizer-step temporaries";
    case Term::workspace: return "cuBLAS/cuBLASLt workspaces held per handle and stream";
    case Term::cuda_context: return "the CUDA context and loaded kernels, outside the caching allocator";
    case Term::allocator_overhead: return "caching-allocator rounding (2 MiB above 10 MiB) and fragmentation";
    case Term::comm_buffers: return "DDP gradient buckets, ZeRO reduce/all-gather buckets, stage-3 prefetch";
    case Term::count: break;
  }
  return "";
}

int run_explain(Io io, const profiles::SetupInputs& in, const std::string& term, const OutputFlags& o) {
  std::optional<Term> only;
  if (!term.empty()) {
    std::vector<std::string> names;
    for (int i = 0; i < kNumTerms; ++i) {
      names.emplace_back(term_name(term_at(i)));
      if (term == names.back()) only = term_at(i);
    }
    if (!only) {
      const auto near = profiles::nearest(term, names);
      throw InputError(Where::at_flag("TERM"), fmt::format("unknown term '{}'", profiles::clip(term)),
                       near.empty() ? "terms: " + fmt::format("{}", fmt::join(names, ", ")) : "did you mean '" + near[0] + "'?");
    }
  }
  const bool with_setup = in.model || in.config;
  std::optional<profiles::BuiltSetup> b;
  std::optional<MemoryBreakdown> e;
  if (with_setup) {
    b = profiles::build_setup(in);
    print_warnings(io.err, b->warnings);
    e = estimate(b->setup, b->calibration ? &*b->calibration : nullptr);
  }
  if (o.format() != Format::table) {
    nlohmann::json doc = {{"schema", "memplan.explain/v1"}, {"terms", nlohmann::json::array()}};
    for (int i = 0; i < kNumTerms; ++i) {
      if (only && term_at(i) != *only) continue;
      nlohmann::json t = {{"name", term_name(term_at(i))}, {"meaning", term_meaning(term_at(i))}};
      if (e) {
        t["formula"] = e->text[i].formula;
        t["source"] = e->text[i].source;
        t["bytes_at_peak"] = e->peak().bytes[i];
      }
      doc["terms"].push_back(t);
    }
    if (e) doc["estimate"] = estimate_json(*b, *e);
    emit(io.out, doc, o.format());
    return kExitOk;
  }
  for (int i = 0; i < kNumTerms; ++i) {
    if (only && term_at(i) != *only) continue;
    io.out << term_name(term_at(i)) << ": " << term_meaning(term_at(i)) << "\n";
    if (e) {
      std::string per_phase;
      for (const PhaseState& ph : e->phases)
        per_phase += fmt::format("{}{} {}{}", per_phase.empty() ? "" : ", ", phase_name(ph.phase), gib(ph.bytes[i]),
                                 &ph == &e->peak() ? " (peak)" : "");
      io.out << "  for this setup: " << per_phase << "\n";
      io.out << "  formula: " << e->text[i].formula << "\n";
      io.out << "  source:  " << e->text[i].source << "\n";
    }
  }
  if (e && (!only || *only == Term::activations)) {
    io.out << "\nsaved tensors of each layer variant, named after its first layer (one row per storage, \"made by -> saved by\"; "
              "categories: activation, weight_copy, loss; checkpointed layers keep only their input):\n";
    std::string seg;
    int64_t sum = 0;
    auto flush = [&] {
      if (!seg.empty()) io.out << fmt::format("    {:<52} {:>11}\n", "total per " + seg, gib(sum));
    };
    for (const SavedTensor& r : e->saved_per_layer) {
      if (r.layer != seg) {
        flush();
        seg = r.layer;
        sum = 0;
        io.out << "  " << seg << ":\n";
      }
      sum += r.bytes;
      io.out << fmt::format("    {:<52} {:>11}  {}\n", r.op, gib(r.bytes), r.category);
    }
    flush();
  }
  if (!e) io.out << "\n(pass --model and the setup flags to see each formula with your numbers)\n";
  return kExitOk;
}

}  // namespace

Command register_gpus(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("gpus", "the GPU presets (memory, family, bf16/fp8, FLOP/s, bandwidth)");
  auto o = std::make_shared<OutputFlags>();
  add_output_flags(*app, *o);
  return {app, [io, o] { return run_gpus(io, *o); }};
}

Command register_models(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("models", "the model presets (HF configs bundled with memplan)");
  auto o = std::make_shared<OutputFlags>();
  add_output_flags(*app, *o);
  return {app, [io, o] { return run_models(io, *o); }};
}

Command register_explain(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("explain", "each term's meaning, formula and source (with a setup: its numbers and saved tensors)");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto term = std::make_shared<std::string>();
  auto o = std::make_shared<OutputFlags>();
  app->add_option("TERM", *term, "only this term (weights, activations, ...)");
  add_setup_flags(*app, *in);
  add_output_flags(*app, *o);
  return {app, [io, in, term, o] { return run_explain(io, with_environment(*in), *term, *o); }};
}

}  // namespace memplan::cli
