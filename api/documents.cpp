// memplan's versioned documents (api/documents.h).
#include "api/documents.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <algorithm>
#include <type_traits>
#include <variant>

#include "estimator/attention_kernel.h"
#include "estimator/checked.h"
#include "estimator/fields.h"
#include "estimator/text.h"

namespace memplan::api {

std::string describe(const TrainingSetup& s) {
  std::string d = fmt::format("{}, {}, micro-batch {} x {} tokens, accumulation {}, checkpointing {}, attention {}",
                              to_string(s.precision), to_string(s.optimizer), s.batch.micro_batch, s.batch.seq_len,
                              s.batch.grad_accum, to_string(s.checkpointing), to_string(s.attention));
  if (s.parallel.num_gpus > 1) d += fmt::format(", {} GPUs", s.parallel.num_gpus);
  if (s.parallel.tensor_parallel > 1)
    d += fmt::format(", TP {}{}", s.parallel.tensor_parallel, s.parallel.sequence_parallel ? " with sequence parallelism" : "");
  if (s.parallel.pipeline_parallel > 1) d += fmt::format(", PP {}", s.parallel.pipeline_parallel);
  if (s.parallel.expert_parallel > 1) d += fmt::format(", EP {}", s.parallel.expert_parallel);
  if (s.parallel.zero_stage > 0) d += fmt::format(", ZeRO-{}", s.parallel.zero_stage);
  if (s.parallel.offload != Offload::none) d += fmt::format(", offload {}", to_string(s.parallel.offload));
  if (s.finetune.mode != FinetuneMode::full)
    d += fmt::format(", {} r={}{}", to_string(s.finetune.mode), s.finetune.lora_rank,
                     s.finetune.adapter_fp32 ? "" : " (adapters in the model's dtype)");
  if (s.parallel.fsdp != FsdpMode::none) d += fmt::format(", FSDP {}", to_string(s.parallel.fsdp));
  if (s.runtime.liger) d += ", Liger kernels";
  if (s.device.kind == DeviceKind::cpu) d += ", CPU";
  return d;
}

namespace {
// A value's origin for people: "file:line:col (key)", "--flag", "<framework> default (source)".
std::string source_of(const profiles::Provenance& o, const std::string& field) {
  if (const auto it = o.fields.find(field); it != o.fields.end()) {
    const Where& w = it->second;
    if (!w.flag.empty()) return w.flag;
    return w.key.empty() ? w.str() : fmt::format("{} ({})", w.str(), w.key);
  }
  if (const auto it = o.defaults.find(field); it != o.defaults.end()) return it->second;
  return "memplan default";
}
}  // namespace

// "torch 2.11 and transformers 5.17 (memplan's defaults; no python3 on PATH)": each release the
// setup runs, with where it came from when neither the config nor a flag stated it (the job's
// Python, cli/python_env.h, or memplan's default and why); releases of the same origin share it.
static std::string describe_releases(const profiles::BuiltSetup& b) {
  std::vector<std::pair<std::string, std::string>> parts;  // (release, origin in words; "" when stated)
  for (const VersionField& f : version_fields()) {
    const auto [major, minor] = f.get(b.setup);
    std::string origin;
    if (!b.origin.fields.count(f.path)) {
      const auto it = b.origin.defaults.find(f.path);
      const std::string said = it == b.origin.defaults.end() ? "" : it->second;
      if (said.rfind(f.default_source, 0) == 0) {  // memplan's default, with why no other was found
        origin = said.size() > std::strlen(f.default_source) + 2 ? said.substr(std::strlen(f.default_source) + 2) : "";
        origin = origin.empty() ? "memplan's default" : "memplan's default; " + origin;
      } else if (said.empty()) {
        origin = "memplan's default";
      } else {  // "installed for PYTHON: FILE says X": the first part
        origin = said.substr(0, said.find(": "));
      }
    }
    parts.emplace_back(fmt::format("{} {}.{}", f.library, major, minor), origin);
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last_of_origin = i + 1 == parts.size() || parts[i + 1].second != parts[i].second;
    const bool first_of_origin = i == 0 || parts[i - 1].second != parts[i].second;
    if (i > 0) out += first_of_origin ? ", " : " and ";
    out += parts[i].first;
    if (last_of_origin && !parts[i].second.empty()) {
      std::string o = parts[i].second;
      if (!first_of_origin && o.rfind("memplan's default", 0) == 0) o.insert(std::strlen("memplan's default"), "s");
      out += " (" + o + ")";
    }
  }
  return out;
}

std::string describe_runtime(const profiles::BuiltSetup& b) {
  const TrainingSetup& s = b.setup;
  const Runtime& r = s.runtime;
  std::vector<std::string> knobs;
  knobs.push_back("loss " + to_string(r, r.loss) + (r.loss_upcast ? "" : " (no fp32 upcast)"));
  knobs.push_back(fmt::format("optimizer {}", to_string(r.optimizer_impl)));
  for (const SwitchField& f : switch_fields())
    if (f.shown && f.get(s) && (!f.in_effect || f.in_effect(s))) knobs.emplace_back(f.shown);
  std::vector<std::string> by_framework;
  for (const auto& [field, source] : b.origin.defaults)
    if (source.rfind(to_string(r.framework), 0) == 0) by_framework.push_back(field);
  std::string line = fmt::format("runtime: {}, {}: {}", to_string(r.framework), describe_releases(b), fmt::join(knobs, ", "));
  if (!by_framework.empty()) line += fmt::format(" (framework defaults: {})", fmt::join(by_framework, ", "));
  return line;
}

nlohmann::json runtime_json(const TrainingSetup& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const VersionField& f : version_fields()) j[f.json_key()] = f.text(s);
  for (const ChoiceField& f : choice_fields())
    if (f.json_section() == "runtime") j[f.json_key()] = f.get(s);
  for (const SwitchField& f : switch_fields())
    if (f.section() == "runtime") j[f.key()] = f.get(s);
  return j;
}

nlohmann::json sources_json(const profiles::BuiltSetup& b) {
  static const char* kFields[] = {memplan::path(&ModelSpec::hidden_size), kBaseQuantPath};
  nlohmann::json j = nlohmann::json::object();
  for (const char* f : kFields) j[std::string(f) == memplan::path(&ModelSpec::hidden_size) ? "model" : f] = source_of(b.origin, f);
  for (const SwitchField& f : switch_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const CountField& f : count_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const ChoiceField& f : choice_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const VersionField& f : version_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const NumberField& f : number_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const ListField& f : list_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const SizeField& f : size_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const TargetField& f : target_fields()) j[f.path] = source_of(b.origin, f.path);
  return j;
}

nlohmann::json setup_json(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  nlohmann::json j;
  // The model's rows marked shown (estimator/model_fields.cpp), under their names.
  for (const ModelField& f : model_fields())
    if (f.in_setup_json)
      std::visit(
          [&](const auto& member) {
            using M = std::decay_t<decltype(member)>;
            if constexpr (std::is_same_v<M, NamedMember>) j["model"][f.name] = member.shown(m);
            else j["model"][f.name] = m.*member;
          },
          f.member);
  if (m.num_experts > 0)
    j["model"]["moe"] = {{"num_experts", m.num_experts},
                         {"num_experts_per_token", m.experts_per_token},
                         {"expert_intermediate_size", m.expert_width()},
                         {"capacity_factor", m.capacity_factor},
                         {"num_shared_experts", m.num_shared_experts}};
  j["batch"] = {{"global_batch", saturating_mul(saturating_mul(s.batch.micro_batch, s.batch.grad_accum), s.parallel.data_parallel())}};
  j["parallel"] = {{"data_parallel", s.parallel.data_parallel()},
                   {"sequence_parallel", s.parallel.sequence_parallel}};
  j["runtime"] = runtime_json(s);
  if (s.finetune.mode != FinetuneMode::full) {
    j["finetune"]["base_quant"] = to_string(s.finetune.base_quant);
    if (s.finetune.base_quant == BaseQuant::nf4) j["finetune"]["double_quant"] = s.finetune.double_quant;
  }
  // The counts at their paths (setup.batch.micro_batch), each where the setup shows it; the choices
  // outside the runtime at theirs (setup.precision, setup.parallel.offload, setup.finetune.mode).
  for (const CountField& f : count_fields())
    if (!f.shown || f.shown(s)) j[f.json_section()][f.json_key()] = f.get(s);
  for (const ChoiceField& f : choice_fields()) {
    if (f.shown && !f.shown(s)) continue;
    if (f.json_section().empty()) j[f.json_key()] = f.get(s);
    else if (f.json_section() != "runtime") j[f.json_section()][f.json_key()] = f.get(s);
  }
  // The numbers (setup.finetune.lora_alpha with adapters, setup.thresholds.target).
  for (const NumberField& f : number_fields())
    if (!f.shown || f.shown(s)) j[f.json_section()][f.json_key()] = f.get(s);
  for (const ListField& f : list_fields())  // setup.finetune.lora_targets with adapters
    if (!f.shown || f.shown(s)) j[f.json_section()][f.json_key()] = f.get(s);
  j["device_kind"] = to_string(s.device.kind);
  return j;
}

nlohmann::json estimate_verdict_json(const MemoryBreakdown& e, const TrainingSetup& s) {
  nlohmann::json v = verdict_json(judge(e, s), s);
  // What the verdict held against the target: the peak, or (the replay ran the step in the
  // target's share with the allocator's cache squeezed) that share plus the context.
  v["needed_bytes"] = e.verdict_bytes();
  // On CUDA: why the allocator overhead in the figure is the percentage formula's guess (null: replayed, or not CUDA).
  v["allocator_overhead_guessed"] = e.replay_why_not.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.replay_why_not);
  return v;
}

nlohmann::json verdict_json(const Verdict& v, const TrainingSetup& s) {
  if (!v.known)
    return {{"fits", nullptr}, {"utilization", nullptr}, {"headroom_bytes", nullptr}, {"status", "unknown"},
            {"target_utilization", s.thresholds.target}, {"reason", "no device capacity (pass --gpu or --gpu-memory)"}};
  return {{"fits", v.fits},
          {"runs", v.runs},
          {"utilization", v.utilization},
          {"headroom_bytes", v.headroom_bytes},
          {"status", v.status},
          {"target_utilization", s.thresholds.target}};
}

nlohmann::json host_json(const MemoryBreakdown& e, const TrainingSetup& s) {
  nlohmann::json terms = nlohmann::json::array();
  for (const HostTerm& h : e.host)
    terms.push_back({{"name", h.name}, {"bytes", h.bytes}, {"formula", h.formula}, {"source", h.source}, {"pinned", h.pinned}});
  const HostVerdict v = judge_host(e, s);
  nlohmann::json node = {{"ranks", v.ranks_per_node},
                         {"total_bytes", v.per_node_bytes},
                         {"pinned_bytes", v.pinned_per_gpu_bytes * v.ranks_per_node},
                         {"capacity_bytes", v.known ? nlohmann::json(v.capacity_bytes) : nlohmann::json(nullptr)},
                         {"fits", v.known ? nlohmann::json(v.fits) : nlohmann::json(nullptr)},
                         {"utilization", v.known ? nlohmann::json(v.utilization) : nlohmann::json(nullptr)}};
  if (!v.known) node["note"] = "host RAM per node unknown: --host-memory SIZE (or hardware.host_memory) checks it";
  return {{"terms", terms},
          {"total_bytes", v.per_gpu_bytes},
          {"per_gpu", {{"terms", terms}, {"total_bytes", v.per_gpu_bytes}, {"pinned_bytes", v.pinned_per_gpu_bytes}}},
          {"per_node", node}};
}

std::string host_line(const MemoryBreakdown& e, const TrainingSetup& s) {
  const HostVerdict v = judge_host(e, s);
  std::string line = fmt::format("host memory: {} per GPU", text::gib(v.per_gpu_bytes));
  if (v.pinned_per_gpu_bytes > 0) line += fmt::format(" ({} pinned)", text::gib(v.pinned_per_gpu_bytes));
  line += fmt::format(", {} per node ({} rank{})", text::gib(v.per_node_bytes), v.ranks_per_node, v.ranks_per_node == 1 ? "" : "s");
  if (!v.known) return line + "; node RAM unknown (--host-memory SIZE checks it)";
  return line + fmt::format("; node RAM {}: {} ({})", text::gib(v.capacity_bytes), v.fits ? "fits" : "does not fit", text::percent(v.utilization));
}

nlohmann::json estimate_json(const profiles::BuiltSetup& b, const MemoryBreakdown& e) {
  const TrainingSetup& s = b.setup;
  nlohmann::json j;
  j["schema"] = "memplan.estimate/v1";
  j["memplan_version"] = MEMPLAN_VERSION;
  j["setup"] = setup_json(s);
  j["setup"]["sources"] = sources_json(b);
  j["model"] = {{"name", s.model.name},
                {"hf_repo", s.model.hf_repo},
                {"parameters", e.params.total},
                {"trainable_parameters", e.params.trainable},
                {"active_parameters_per_token", e.params.active_per_token}};
  const PhaseState& peak = e.peak();
  nlohmann::json terms = nlohmann::json::array();
  for (int i = 0; i < kNumTerms; ++i)
    terms.push_back({{"name", term_name(term_at(i))},
                     {"bytes", peak.bytes[i]},
                     {"formula", e.text[i].formula},
                     {"source", e.text[i].source}});
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseState& ph : e.phases) {
    nlohmann::json t;
    for (int i = 0; i < kNumTerms; ++i) t[term_name(term_at(i))] = ph.bytes[i];
    phases.push_back({{"name", phase_name(ph.phase)}, {"bytes", ph.total()}, {"allocated_bytes", ph.allocated()},
                      {"reserved_bytes", ph.reserved()}, {"at", ph.at}, {"terms", t}});
  }
  nlohmann::json saved = nlohmann::json::array();
  for (const SavedTensor& r : e.saved_per_layer)
    saved.push_back({{"segment", r.layer}, {"op", r.op}, {"bytes", r.bytes}, {"category", r.category}});
  // The figures a user compares with what the GPU shows: torch.cuda.max_memory_allocated() (the
  // tensors; its peak may fall in another phase), max_memory_reserved(), and the device figure.
  const int64_t allocated = e.allocated_peak_bytes();
  j["per_gpu"] = {{"terms", terms},
                  {"peak_bytes", e.peak_bytes()},
                  {"allocated_peak_bytes", allocated},
                  {"reserved_peak_bytes", peak.reserved()},
                  {"device_peak_bytes", peak.total()},
                  {"peak_phase", phase_name(peak.phase)},
                  {"peak_at", peak.at},
                  {"phases", phases},
                  {"saved_tensors_per_layer", saved}};
  if (!e.ranks.empty()) {
    // The figures above are the worst rank's; each rank's peak where the ranks differ.
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : e.ranks) {
      nlohmann::json ph;
      for (int i = 0; i < kNumPhases; ++i) ph[phase_name(static_cast<Phase>(i))] = r.phase_bytes[i];
      ranks.push_back({{"first_rank", r.rank}, {"last_rank", r.last_rank}, {"peak_bytes", r.peak_bytes}, {"phases", ph}});
    }
    j["per_gpu"]["worst_rank"] = {{"rank", e.worst_rank}, {"why", e.worst_rank_why}};
    j["per_gpu"]["ranks"] = ranks;
  }
  j["host"] = host_json(e, s);
  j["device"] = {{"name", s.device.name},
                 {"kind", to_string(s.device.kind)},
                 {"capacity_bytes", s.device.capacity_bytes},
                 {"allocator_cap_bytes", s.device.allocator_cap_bytes > 0 ? nlohmann::json(s.device.allocator_cap_bytes) : nlohmann::json(nullptr)},
                 {"family", s.device.family}};
  j["verdict"] = estimate_verdict_json(e, s);
  const AttentionKernel ak = attention_kernel(s);
  j["attention_kernel"] = {{"name", backend_name(ak.backend)}, {"enable_gqa", ak.enable_gqa}, {"why", ak.why}};
  j["calibrated"] = e.calibrated;
  if (e.calibrated) j["calibration"] = e.calibration;
  j["notes"] = e.notes;
  nlohmann::json warnings = nlohmann::json::array();
  for (const Warning& w : b.warnings) warnings.push_back(w.render());
  j["warnings"] = warnings;
  return j;
}


namespace {

nlohmann::json change_json(const planner::Change& c) {
  return {{"step", c.step}, {"flags", c.flags}, {"cost", c.cost}, {"peak_bytes", c.peak_bytes}, {"fits", c.fits}};
}

nlohmann::json option_json(const planner::FitOption& o) {
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : o.changes) changes.push_back({{"dimension", c.step}, {"flags", c.flags}, {"what", c.cost}});
  return {{"flags", o.flags},
          {"changes", changes},
          {"peak_bytes", o.peak_bytes},
          {"fits", true},
          {"modelled_tokens_per_s", o.time.tokens_per_s},
          {"relative_speed", o.relative_speed},
          {"host_per_node_bytes", o.host_per_node_bytes},
          {"host_checked", o.host_known},
          {"changes_training", o.changes_training},
          {"changes_learning", o.changes_learning}};
}

}  // namespace

nlohmann::json fit_json(const profiles::BuiltSetup& b, const MemoryBreakdown& e, const planner::FitReport& r) {
  nlohmann::json doc = estimate_json(b, e);
  doc["schema"] = "memplan.fit/v1";
  doc["largest_micro_batch"] = r.largest_micro_batch;
  doc["largest_micro_batch_peak_bytes"] = r.largest_micro_batch_peak;
  doc["largest_micro_batch_that_runs"] = r.largest_micro_batch_runs;
  doc["searched"] = r.searched;
  for (const char* k : {"single", "options", "training_changes", "left_out"}) doc[k] = nlohmann::json::array();
  for (const auto& c : r.single) doc["single"].push_back(change_json(c));
  for (const auto& c : r.options) doc["options"].push_back(option_json(c));
  for (const auto& c : r.training_changes) doc["training_changes"].push_back(option_json(c));
  doc["fewest_changes"] = r.fewest ? option_json(*r.fewest) : nlohmann::json(nullptr);
  for (const auto& l : r.left_out) doc["left_out"].push_back({{"option", l.option}, {"why", l.why}});
  return doc;
}

nlohmann::json candidate_json(const planner::Candidate& c) {
  const TrainingSetup& s = c.setup;
  return {{"micro_batch", s.batch.micro_batch},
          {"grad_accum", s.batch.grad_accum},
          {"global_batch", c.global_batch},
          {"precision", to_string(s.precision)},
          {"optimizer", to_string(s.optimizer)},
          {"checkpointing", to_string(s.checkpointing)},
          {"attention", to_string(s.attention)},
          {"zero_stage", s.parallel.zero_stage},
          {"offload", to_string(s.parallel.offload)},
          {"fsdp", to_string(s.parallel.fsdp)},
          {"finetune", to_string(s.finetune.mode)},
          {"liger", s.runtime.liger},
          {"peak_bytes", c.peak_bytes},
          {"host_per_node_bytes", c.host_per_node_bytes},
          {"host_fits", c.host_fits},
          {"fits", c.fits},
          {"modelled_step_seconds", c.time.total_s},
          {"modelled_tokens_per_s", c.time.tokens_per_s}};
}

// memplan.plan/v1: the request, what was searched, and the plan (or why none).
nlohmann::json plan_json(const planner::ResolvedPlan& rp, const planner::PlanResult& r, const EmittedConfig& e, const PlanFlags& f,
                         const profiles::SetupInputs& in) {
  const TrainingSetup& s = rp.base();
  const planner::PlanRequest& req = rp.request;
  nlohmann::json doc = {{"schema", "memplan.plan/v1"}, {"memplan_version", MEMPLAN_VERSION}};
  doc["request"] = {{"model", s.model.name},
                    {"gpu", s.device.name},
                    {"num_gpus", s.parallel.num_gpus},
                    {"capacity_bytes", s.device.capacity_bytes},
                    {"global_batch", req.global_batch},
                    {"seq_len", s.batch.seq_len},
                    {"global_batch_source", planner::global_batch_source(rp.ask)},
                    {"budget_fraction", req.budget},
                    {"budget_bytes", r.budget_bytes},
                    {"host_memory_bytes", s.parallel.host_memory_bytes > 0 ? nlohmann::json(s.parallel.host_memory_bytes) : nlohmann::json(nullptr)},
                    {"gpus_per_node", s.parallel.gpus_per_node}};
  doc["left_out"] = nlohmann::json::array();
  for (const auto& l : r.left_out) doc["left_out"].push_back({{"option", l.option}, {"why", l.why}});
  doc["notes"] = r.regime_notes;
  if (!r.format_note.empty()) doc["format_note"] = r.format_note;
  doc["tiers"] = nlohmann::json::array();
  for (const auto& tp : r.tiers) {
    nlohmann::json j = {{"tier", tp.tier}, {"fraction", tp.fraction}, {"budget_bytes", tp.budget_bytes}, {"found", tp.found}};
    if (tp.found) j["best"] = candidate_json(tp.best);
    doc["tiers"].push_back(j);
  }
  doc["search"] = {{"candidates", r.candidates},
                   {"fitting", r.fitting},
                   {"undecided", r.undecided},
                   {"activation_timelines", r.timelines},
                   {"memory_compositions", r.compositions},
                   {"seconds", r.seconds}};
  doc["throughput_note"] = "step times and tokens/s are modelled from FLOPs and bandwidths, not measured";
  doc["calibrated"] = rp.built.calibration.has_value();
  if (rp.built.calibration) doc["calibration"] = rp.built.calibration->file;
  if (!r.found) {
    doc["found"] = false;
    doc["why_not"] = r.why_not;
    doc["smallest_gpu_where_it_fits"] = r.smallest_gpu;
    doc["smallest_gpu_count_where_it_fits"] = r.smallest_gpu_count;
    return doc;
  }
  doc["found"] = true;
  doc["best"] = candidate_json(r.best);
  doc["best"]["modelled"] = {{"compute_s", r.best.time.compute_s},
                             {"comm_s", r.best.time.comm_s},
                             {"offload_s", r.best.time.offload_s},
                             {"optimizer_s", r.best.time.optimizer_s},
                             {"utilisation", r.best.time.utilisation}};
  if (!r.batch_note.empty()) doc["batch_note"] = r.batch_note;
  doc["runners_up"] = nlohmann::json::array();
  for (const auto& ru : r.runners_up) {
    nlohmann::json j = candidate_json(ru.candidate);
    j["dimension"] = ru.dimension;
    j["value"] = ru.value;
    j["why"] = ru.why;
    doc["runners_up"].push_back(j);
  }
  if (!e.written.empty()) doc["emitted"] = {{"format", f.ask.emit}, {"path", e.written}};
  if (e.kept) doc["emitted"]["kept"] = {{"from", *in.config}, {"changes", e.kept->file.changes}};
  else if (!e.not_kept.empty()) doc["emitted"]["not_kept"] = {{"from", *in.config}, {"why", e.not_kept}};
  return doc;
}

nlohmann::json plan_table_json(const planner::ResolvedPlan& rp, const std::vector<planner::TableRow>& rows) {
  const TrainingSetup& s = rp.base();
  const planner::PlanAsk& ask = rp.ask;
  const planner::PlanRequest& req = rp.request;
  nlohmann::json doc = {{"schema", "memplan.plan-table/v1"}, {"memplan_version", MEMPLAN_VERSION}};
  doc["request"] = {{"model", s.model.name}, {"num_gpus", s.parallel.num_gpus}, {"global_batch", req.global_batch},
                    {"global_batch_source", planner::global_batch_source(ask)}, {"seq_len", s.batch.seq_len},
                    {"budget_fraction", req.budget}};
  doc["rows"] = nlohmann::json::array();
  for (const auto& row : rows) {
    nlohmann::json j = {{"label", row.label}, {"capacity_bytes", row.device.capacity_bytes}, {"found", row.result.found}};
    if (row.result.found) {
      j["best"] = candidate_json(row.result.best);
      j["optimizations"] = planner::optimisations(row.result.best.setup, s);
    } else {
      j["why_not"] = row.result.why_not.empty() ? row.result.format_note : row.result.why_not;
    }
    doc["rows"].push_back(j);
  }
  return doc;
}

}  // namespace memplan::api
