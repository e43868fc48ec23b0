// The registry of setup fields: each knob of TrainingSetup that is a yes/no switch, declared once
// with everything the layers above need to speak it -- its setup path (provenance, `sources` JSON,
// validation problems), its flag and the flag's help, its YAML keys and aliases, its default and
// the source of that default, and the words the runtime line shows when it is on.
//
// The flag parser (cli/common.cpp), the flags-to-setup step (profiles/build.cpp), the memplan YAML
// reader (profiles/config.cpp), the `runtime` and `sources` JSON (cli/common.cpp), the runtime line,
// the memplan YAML writer (planner/emit.cpp) and the Python keywords (the flags, python/memplan)
// iterate this table; the format readers and the rule sets name a switch by its enumerator, so a
// misspelt path does not compile. Adding a switch is one enumerator, one row and its formula.
//
// Values that are not yes/no (sizes, counts, choices, versions) are still written out by hand in
// those places; they join the registry as it grows (issue 25).
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "estimator/setup.h"

namespace memplan {

enum class Switch {
  loss_upcast,
  keep_logits,
  keep_cache,
  zero_grad_set_to_none,
  zero_grad_after_forward,
  liger,
  optimizer_in_backward,
  activation_offload,
  compile,
  compile_loss,
  fsdp_no_sync,
  fp8,
  fp8_recompute_weight,
  expandable_segments,
  double_quant,
  sequence_parallel,
  count  // sentinel: the number of switches
};
constexpr size_t kSwitchCount = static_cast<size_t>(Switch::count);

struct SwitchField {
  Switch id;
  // The setup path: "runtime.liger". Its first part is the YAML section the switch is read in
  // (runtime:, lora:/finetune:/peft:, training: or the top level for parallel.*), its last part the
  // switch's own key there, which the memplan YAML writer uses.
  const char* path;
  const char* flag;                   // "--liger" (and its negation "--no-liger")
  const char* help;                   // the flag's help
  std::array<const char*, 3> aliases; // more YAML keys in the same section (nullptr: none)
  bool (*get)(const TrainingSetup&);
  void (*set)(TrainingSetup&, bool);
  const char* default_source;         // where TrainingSetup's default comes from
  const char* shown;                  // the runtime line's words when on (nullptr: not listed)
  // Whether the switch changes anything for this setup (fsdp_no_sync only under FSDP with
  // accumulation); nullptr: always. The runtime line lists a switch only when it is in effect.
  bool (*in_effect)(const TrainingSetup&);

  std::string section() const;  // "runtime", "finetune", "parallel"
  std::string key() const;      // "liger"
  std::string negation() const; // "--no-liger"
};

// Every switch, in enumerator order (row i has id == Switch(i); checked at start-up).
const std::array<SwitchField, kSwitchCount>& switch_fields();
const SwitchField& field(Switch id);
inline const char* path(Switch id) { return field(id).path; }

}  // namespace memplan
