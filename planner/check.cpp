// memplan check's logic. A change's cost is measured, not guessed: the config now is estimated
// again with one field put back to its baseline value, and the difference is that field's effect
// (per term and on the peak). Interactions between changes are not split: two changes that only
// matter together (micro-batch and sequence length both doubled) each get the effect of undoing
// it alone.
#include "planner/check.h"

#include "estimator/fields.h"
#include "estimator/text.h"
#include "profiles/profiles.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

namespace memplan::planner {
namespace {

int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

// One comparable setup field: how to print it and how to put the baseline's value back.
struct FieldSpec {
  const char* field;
  std::string label;
  std::function<std::string(const TrainingSetup&)> text;
  std::function<void(TrainingSetup& into, const TrainingSetup& from)> revert;
  // False when the field means nothing for this pair (the LoRA rank under full fine-tuning).
  std::function<bool(const TrainingSetup& a, const TrainingSetup& b)> relevant = nullptr;
  bool runtime = false;  // FieldChange::blamed_only_if_stated
};

template <class T>
std::string num(T v) {
  return fmt::format("{}", v);
}

bool adapters(const TrainingSetup& a, const TrainingSetup& b) {
  return a.finetune.mode != FinetuneMode::full || b.finetune.mode != FinetuneMode::full;
}
// Adapters on both sides: what describes them (their dtype, their targets) means something only
// then (a switch to full fine-tuning is the method's change).
bool adapters_on_both(const TrainingSetup& a, const TrainingSetup& b) {
  return a.finetune.mode != FinetuneMode::full && b.finetune.mode != FinetuneMode::full;
}

using Relevant = std::function<bool(const TrainingSetup&, const TrainingSetup&)>;

// `d` as the card of `card` bytes under the allocator cap of `cap_from` (none: the card's memory).
void capped(DeviceSpec& d, int64_t card, const DeviceSpec& cap_from) {
  const DeviceSpec from = cap_from;  // may be d itself
  d.capacity_bytes = card;
  d.allocator_cap_bytes = 0;
  d.allocator_cap_fraction = 0;
  d.uncapped_bytes = 0;
  profiles::carry_allocator_cap(d, from);
}

// A count of the registry (estimator/fields.h): its path, its words, its member.
FieldSpec count_spec(Count id, Relevant relevant = nullptr) {
  const CountField& f = field(id);
  return {f.path, f.words, [&f](const TrainingSetup& s) { return num(f.get(s)); },
          [&f](TrainingSetup& s, const TrainingSetup& b) { f.set(s, f.get(b)); }, std::move(relevant)};
}
// A choice of the registry: its path, its refusal's words, its name (which reads back as itself).
FieldSpec choice_spec(Choice id, Relevant relevant = nullptr, bool runtime = false) {
  const ChoiceField& f = field(id);
  return {f.path, f.what, [&f](const TrainingSetup& s) { return f.get(s); },
          [&f](TrainingSetup& s, const TrainingSetup& b) { f.set(s, f.get(b)); }, std::move(relevant), runtime};
}

// A list of the registry, with adapters on both sides: its names joined ("q,v"; an empty list is the PEFT
// default for the model, which a format's reader may have stated for the file: blamed only where
// the file states it).
FieldSpec list_spec(List id) {
  const ListField& f = field(id);
  return {f.path, f.words,
          [&f](const TrainingSetup& s) {
            const std::vector<std::string> v = f.get(s);
            return v.empty() ? std::string("the default") : fmt::format("{}", fmt::join(v, ","));
          },
          [&f](TrainingSetup& s, const TrainingSetup& b) { f.set(s, f.get(b)); }, adapters_on_both, true};
}

// A model field (estimator/fields.h's model rows): its path, its words, its member; reverting it
// also puts back the members that follow it (head_dim follows the width and the head count).
template <class T, class... Follow>
FieldSpec model_spec(T ModelSpec::*member, const char* label, Follow... follow) {
  return {memplan::path(member), label, [member](const TrainingSetup& s) { return num(s.model.*member); },
          [member, follow...](TrainingSetup& s, const TrainingSetup& b) {
            s.model.*member = b.model.*member;
            ((s.model.*follow = b.model.*follow), ...);
          }};
}

// The architecture fields compared when the model keeps its name (an inline model edited in place).
const std::vector<FieldSpec>& arch_fields() {
  static const std::vector<FieldSpec> t = {
      model_spec(&ModelSpec::hidden_size, "hidden size", &ModelSpec::head_dim),
      model_spec(&ModelSpec::num_layers, "layers"),
      model_spec(&ModelSpec::num_attention_heads, "attention heads", &ModelSpec::head_dim),
      model_spec(&ModelSpec::num_key_value_heads, "key-value heads"),
      model_spec(&ModelSpec::intermediate_size, "MLP width"),
      model_spec(&ModelSpec::vocab_size, "vocabulary"),
      model_spec(&ModelSpec::num_experts, "experts"),
      model_spec(&ModelSpec::experts_per_token, "experts per token"),
      model_spec(&ModelSpec::capacity_factor, "capacity factor"),
  };
  return t;
}

// Everything else, in report order.
const std::vector<FieldSpec>& setup_fields() {
  static const std::vector<FieldSpec> t = {
      count_spec(Count::micro_batch),
      count_spec(Count::seq_len),
      count_spec(Count::grad_accum),
      choice_spec(Choice::precision),
      choice_spec(Choice::optimizer),
      // Checkpointing by hand: its revert copies the whole mode (a layers: list is kept as read).
      {memplan::path(Choice::checkpointing), field(Choice::checkpointing).what,
       [](const TrainingSetup& s) { return to_string(s.checkpointing); },
       [](TrainingSetup& s, const TrainingSetup& b) { s.checkpointing = b.checkpointing; }},
      choice_spec(Choice::attention),
      count_spec(Count::num_gpus),
      count_spec(Count::zero_stage),
      choice_spec(Choice::offload),
      count_spec(Count::tensor_parallel),
      count_spec(Count::pipeline_parallel),
      count_spec(Count::expert_parallel),
      count_spec(Count::gpus_per_node),  // the host memory per node, hybrid sharding's groups
      {memplan::path(Choice::finetune), "fine-tuning", [](const TrainingSetup& s) { return std::string(to_string(s.finetune.mode)); },
       [](TrainingSetup& s, const TrainingSetup& b) {
         s.finetune.mode = b.finetune.mode;
         s.finetune.base_quant = b.finetune.base_quant;
       }},
      count_spec(Count::lora_rank, adapters),
      count_spec(Count::freeze_layers),
      choice_spec(Choice::adapter_dtype, adapters_on_both, true),  // a framework's default (torchtune: the model's)
      list_spec(List::lora_targets),
      // The target: a different card, or the same one with another capacity (hardware.gpu_memory),
      // or another allocator cap on it (hardware.allocator_cap), each reverted alone.
      {memplan::path(Target::gpu), "GPU", [](const TrainingSetup& s) { return s.device.name; },
       // The CPU's allocator does not round as CUDA's does: the rounding goes with the device.
       [](TrainingSetup& s, const TrainingSetup& b) {
         s.device = b.device;
         s.runtime.allocator_rounding = b.runtime.allocator_rounding;
       }},
      {memplan::path(Size::gpu_memory), "GPU memory",
       [](const TrainingSetup& s) { return s.device.card_bytes() > 0 ? text::fixed_gib(s.device.card_bytes()) : std::string("unknown"); },
       [](TrainingSetup& s, const TrainingSetup& b) { capped(s.device, b.device.card_bytes(), s.device); },
       [](const TrainingSetup& a, const TrainingSetup& b) { return a.device.name == b.device.name; }},
      {memplan::path(Size::allocator_cap), "allocator cap",
       [](const TrainingSetup& s) {
         const DeviceSpec& d = s.device;
         if (d.allocator_cap_bytes <= 0) return std::string("none");
         return d.allocator_cap_fraction > 0 ? fmt::format("{:g} of the card", d.allocator_cap_fraction) : text::fixed_gib(d.allocator_cap_bytes);
       },
       [](TrainingSetup& s, const TrainingSetup& b) { capped(s.device, s.device.card_bytes(), b.device); }},
      {memplan::path(Number::target), "target utilization",
       [](const TrainingSetup& s) { return fmt::format("{:g}%", 100.0 * s.thresholds.target); },
       [](TrainingSetup& s, const TrainingSetup& b) { s.thresholds.target = b.thresholds.target; }},
  };
  return t;
}

// The runtime's fields, from the registry (estimator/fields.h): the releases, the runtime's choices
// (framework, optimizer kernel, FSDP, the loss) and every switch (by its flag's words). A switch that
// does nothing now (fsdp_no_sync without FSDP accumulation) is not compared: putting it back would
// change nothing. Then the numbers with a flag (the LoRA scale and dropout), with adapters.
const std::vector<FieldSpec>& runtime_fields() {
  static const std::vector<FieldSpec> t = [] {
    std::vector<FieldSpec> v;
    for (const VersionField& f : version_fields())
      v.push_back({f.path, fmt::format("{} version", f.library), [&f](const TrainingSetup& s) { return f.text(s); },
                   [&f](TrainingSetup& s, const TrainingSetup& b) {
                     const auto [major, minor] = f.get(b);
                     f.set(s, major, minor);
                   },
                   nullptr, true});
    // The runtime's choices; the loss among them, which a switch's rule may have set (--liger:
    // fused-linear): compared on its own, so its bytes are blamed on it rather than on nothing.
    for (const ChoiceField& f : choice_fields())
      if (f.runtime()) v.push_back(choice_spec(f.id, nullptr, true));
    for (const SwitchField& f : switch_fields()) {
      FieldSpec spec{f.path, f.flag + 2, [&f](const TrainingSetup& s) { return std::string(f.get(s) ? "on" : "off"); },
                     [&f](TrainingSetup& s, const TrainingSetup& b) { f.set(s, f.get(b)); }, nullptr, true};
      if (f.in_effect) spec.relevant = [&f](const TrainingSetup&, const TrainingSetup& now) { return f.in_effect(now); };
      v.push_back(std::move(spec));
    }
    for (const NumberField& f : number_fields())
      if (f.flag)
        v.push_back({f.path, f.flag + 2, [&f](const TrainingSetup& s) { return num(f.get(s)); },
                     [&f](TrainingSetup& s, const TrainingSetup& b) { f.set(s, f.get(b)); }, adapters});
    return v;
  }();
  return t;
}

// The whole model, when it changed to another one.
const FieldSpec& model_field() {
  static const FieldSpec f = {"model", "model", [](const TrainingSetup& s) { return s.model.name; },
                              [](TrainingSetup& s, const TrainingSetup& b) { s.model = b.model; }};
  return f;
}

bool same_architecture(const ModelSpec& a, const ModelSpec& b) {
  for (const FieldSpec& f : arch_fields()) {
    TrainingSetup x, y;
    x.model = a;
    y.model = b;
    if (f.text(x) != f.text(y)) return false;
  }
  return a.model_type == b.model_type && a.gated_mlp == b.gated_mlp && a.tie_word_embeddings == b.tie_word_embeddings &&
         a.head == b.head && a.head_dim == b.head_dim && a.moe_intermediate_size == b.moe_intermediate_size;
}

// The fields that differ, each with its measured effect.
std::vector<FieldChange> changed_fields(const TrainingSetup& base, const Calibration* base_cal, const TrainingSetup& now,
                                        const Calibration* cal, const MemoryBreakdown& now_breakdown) {
  std::vector<const FieldSpec*> specs;
  if (!same_architecture(base.model, now.model)) {
    if (base.model.name != now.model.name) {
      specs.push_back(&model_field());
    } else {
      for (const FieldSpec& f : arch_fields()) specs.push_back(&f);
    }
  }
  for (const FieldSpec& f : setup_fields()) specs.push_back(&f);
  for (const FieldSpec& f : runtime_fields()) specs.push_back(&f);

  const PhaseState& now_peak = now_breakdown.peak();
  const int64_t over_now = now_breakdown.verdict_bytes() - target_bytes(now);
  std::vector<FieldChange> out;
  for (const FieldSpec* f : specs) {
    if (f->relevant && !f->relevant(base, now)) continue;
    FieldChange c;
    c.field = f->field;
    c.label = f->label;
    c.blamed_only_if_stated = f->runtime;
    c.before = f->text(base);
    c.after = f->text(now);
    if (c.before == c.after) continue;
    TrainingSetup reverted = now;
    f->revert(reverted, base);
    if (validate(reverted).empty()) {
      const bool device = c.field == memplan::path(Target::gpu) || c.field == memplan::path(Size::gpu_memory);
      const MemoryBreakdown r = estimate(reverted, device ? base_cal : cal);
      const PhaseState& rp = r.peak();
      c.effect_known = true;
      c.peak_effect_bytes = now_peak.total() - rp.total();
      c.over_effect_bytes = over_now - (r.verdict_bytes() - target_bytes(reverted));
      for (int i = 0; i < kNumTerms; ++i) c.term_effect_bytes[i] = now_peak.bytes[i] - rp.bytes[i];
    }
    out.push_back(std::move(c));
  }
  std::stable_sort(out.begin(), out.end(), [](const FieldChange& a, const FieldChange& b) {
    if (a.effect_known != b.effect_known) return a.effect_known;
    return a.over_effect_bytes > b.over_effect_bytes;
  });
  return out;
}

}  // namespace

std::string FieldChange::text() const { return fmt::format("{} {} -> {}", label, before, after); }

namespace {

// compare() with the config now already estimated (gate() has it).
Comparison compare_estimated(const TrainingSetup& base, const Calibration* base_cal, const TrainingSetup& now,
                             const Calibration* cal, const MemoryBreakdown& n) {
  const MemoryBreakdown b = estimate(base, base_cal);
  Comparison c;
  c.base_peak_bytes = b.peak_bytes();
  c.peak_bytes = n.peak_bytes();
  c.growth = c.base_peak_bytes > 0
                 ? static_cast<double>(c.peak_bytes - c.base_peak_bytes) / static_cast<double>(c.base_peak_bytes)
                 : 0.0;
  c.changes = changed_fields(base, base_cal, now, cal, n);
  for (int i = 0; i < kNumTerms; ++i) {
    TermDelta d;
    d.term = term_at(i);
    d.before_bytes = b.peak().bytes[i];
    d.after_bytes = n.peak().bytes[i];
    const int64_t delta = d.delta_bytes();
    if (abs64(delta) < kTermDeltaFloorBytes) continue;
    // A cause moves this term the same way, by at least a tenth of the move (and a MiB).
    const int64_t floor = std::max(kTermDeltaFloorBytes, abs64(delta) / 10);
    for (size_t k = 0; k < c.changes.size(); ++k) {
      const int64_t e = c.changes[k].term_effect_bytes[i];
      if (c.changes[k].effect_known && (e > 0) == (delta > 0) && abs64(e) >= floor) d.causes.push_back(k);
    }
    std::stable_sort(d.causes.begin(), d.causes.end(), [&](size_t x, size_t y) {
      return abs64(c.changes[x].term_effect_bytes[i]) > abs64(c.changes[y].term_effect_bytes[i]);
    });
    c.terms.push_back(std::move(d));
  }
  std::stable_sort(c.terms.begin(), c.terms.end(), [](const TermDelta& x, const TermDelta& y) {
    return abs64(x.delta_bytes()) > abs64(y.delta_bytes());
  });
  return c;
}

}  // namespace

Comparison compare(const TrainingSetup& base, const Calibration* base_cal, const TrainingSetup& now,
                   const Calibration* cal) {
  return compare_estimated(base, base_cal, now, cal, estimate(now, cal));
}

std::string largest_contributor(const std::array<int64_t, kNumTerms>& t, const std::vector<std::string>& fields_in_file) {
  const int64_t activation_like = sum_of(t, kDynamicTerms);
  const int64_t state_like = sum_of(t, kModelStateTerms);
  static const std::vector<std::string> batch_first = {memplan::path(Count::micro_batch), memplan::path(Count::seq_len),
                                                       memplan::path(Choice::checkpointing), memplan::path(Choice::attention),
                                                       "model"};
  static const std::vector<std::string> model_first = {"model", memplan::path(Choice::precision), memplan::path(Choice::optimizer),
                                                       memplan::path(Count::zero_stage), memplan::path(Count::micro_batch)};
  const std::vector<std::string>& order = activation_like >= state_like ? batch_first : model_first;
  for (const std::string& f : order) {
    // The model counts as set when the file names it (its size fields then point at that line).
    const std::string key = f == "model" ? memplan::path(&ModelSpec::hidden_size) : f;
    if (std::find(fields_in_file.begin(), fields_in_file.end(), key) != fields_in_file.end()) return f;
  }
  return order.front();
}

GateResult gate(const TrainingSetup& now, const Calibration* cal, const TrainingSetup* base, const Calibration* base_cal,
                const GateOptions& options, size_t warnings, const std::vector<std::string>& fields_in_file) {
  GateResult r;
  const MemoryBreakdown e = estimate(now, cal);
  const PhaseState& peak = e.peak();
  r.verdict = judge(e, now);
  r.peak_bytes = peak.total();
  r.needed_bytes = e.verdict_bytes();
  r.capacity_bytes = now.device.capacity_bytes;
  r.target_bytes = target_bytes(now);
  r.peak_phase = peak.phase;
  r.peak_at = peak.at;
  r.terms = peak.bytes;
  r.calibrated = e.calibrated;
  r.over_budget = r.verdict.known && !r.verdict.fits;
  if (base) {
    r.baseline = compare_estimated(*base, base_cal, now, cal, e);
    r.over_growth = options.max_growth && r.baseline->growth > *options.max_growth;
  }
  r.warned = options.strict && warnings > 0;
  if (!r.over_budget && !r.over_growth) return r;
  // Blame the change that cost the most: over-target bytes when over budget (a smaller card
  // counts), peak bytes when only the growth failed.
  if (r.baseline) {
    int64_t best = 0;
    for (size_t k = 0; k < r.baseline->changes.size(); ++k) {
      const FieldChange& c = r.baseline->changes[k];
      if (c.blamed_only_if_stated && std::find(fields_in_file.begin(), fields_in_file.end(), c.field) == fields_in_file.end())
        continue;  // a runtime value a rule set: the key that set off the rule is the file's, not this
      const int64_t effect = r.over_budget ? c.over_effect_bytes : c.peak_effect_bytes;
      if (c.effect_known && effect > best) {
        best = effect;
        r.blame_change = k;
      }
    }
  }
  r.blame = r.blame_change ? r.baseline->changes[*r.blame_change].field : largest_contributor(r.terms, fields_in_file);
  return r;
}

}  // namespace memplan::planner
