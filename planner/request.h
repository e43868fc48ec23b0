// What a `memplan plan` request is, resolved: the base setup built from the flags and the config
// (under the runtime --emit implies, with the tool's own model for torchtune and LitGPT), the
// dimensions the flags fix, the request plan() searches, --table's devices and the catalog's cards
// for "where would it fit". The command line only parses flags and prints what plan() returns.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "planner/emit.h"
#include "planner/plan.h"
#include "profiles/profiles.h"

namespace memplan::planner {

// Neither copied nor moved: the request points at the calibration the built setup holds.
struct ResolvedPlan {
  ResolvedPlan() = default;
  ResolvedPlan(const ResolvedPlan&) = delete;
  ResolvedPlan& operator=(const ResolvedPlan&) = delete;

  profiles::LoadedConfig config;     // --config as read (empty without one)
  profiles::SetupInputs inputs;      // the flags, with the framework --emit implies
  profiles::BuiltSetup built;        // the base setup; its model is the tool's for torchtune/LitGPT
  bool emits = false;                // --emit given
  EmitFormat format = EmitFormat::memplan;
  std::string framework_from_emit;   // the runtime --emit decided, when it did
  ToolModelName tool;                // torchtune's / LitGPT's name for the model
  PlanAsk ask;                       // as asked, with the dimensions the flags fix
  PlanRequest request;
  std::vector<std::pair<std::string, DeviceSpec>> table;  // --table's rows; empty: one plan
  std::vector<std::pair<std::string, DeviceSpec>> cards;  // every preset card, for "where it fits"

  const TrainingSetup& base() const { return built.setup; }
  const Calibration* calibration() const { return built.calibration ? &*built.calibration : nullptr; }
};

// InputError (at the flag) for an unknown --emit format, a model torchtune or LitGPT has no
// builder for, a --table entry that is neither a size nor a preset, or what build_setup refuses.
// `built` sees the setup's warnings as soon as it is built, before anything after it can fail.
std::unique_ptr<const ResolvedPlan> resolve_plan(const profiles::SetupInputs& in, const PlanAsk& ask, const std::string& table,
                                                 const std::function<void(const std::vector<Warning>&)>& built);

// The emitter's context for a plan's best: the model as a preset name or inline, the GPU preset,
// the batch, budget, peak and modelled speed.
EmitContext emit_context(const ResolvedPlan& rp, const PlanResult& r);

// The devices of --table: memory sizes (the base card's family at that capacity) or GPU presets.
std::vector<std::pair<std::string, DeviceSpec>> table_devices(const std::string& list, const TrainingSetup& base);

}  // namespace memplan::planner
