// libFuzzer target: fit and plan over random setups and requests. Besides the estimator's
// invariants: fit's largest micro-batch fits and one more does not; plan's winner fits its
// budget, its peak is what estimate() holds against the card (verdict_bytes) for its setup, and its global batch is what it says;
// replaying only the groups that could win (the default) answers as replaying every group does.
#include "planner/fit.h"
#include "planner/plan.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memplan;
  FuzzedDataProvider d(data, size);
  TrainingSetup s = fuzz::random_setup(d);
  // Keep one input well under a second under ASan: a plan simulates up to ~100 timelines, and the
  // HF expert loop is simulated op by op for each expert (a 60-expert layer took ~20 ms a timeline
  // under ASan; corpus/fuzz_planner/found_slow_moe_plan). fuzz_estimator draws up to 64 experts.
  s.model.num_layers = std::min<int64_t>(s.model.num_layers, 48);
  s.model.num_experts = std::min<int64_t>(s.model.num_experts, 16);
  if (!validate(s).empty() || s.device.capacity_bytes <= 0) return 0;
  const int64_t limit = d.ConsumeIntegralInRange<int64_t>(1, 256);
  const int64_t mb = planner::largest_micro_batch(s, nullptr, limit);
  if (mb > 0) {
    TrainingSetup at = s;
    at.batch.micro_batch = mb;
    // What the verdict holds: the peak, or the target's share the replay runs the step in.
    if (estimate(at).verdict_bytes() > target_bytes(at)) fuzz::fail("largest_micro_batch does not fit");
    at.batch.micro_batch = mb + 1;
    if (mb < limit && validate(at).empty() && estimate(at).verdict_bytes() <= target_bytes(at))
      fuzz::fail("largest_micro_batch + 1 fits too");
  }
  planner::PlanAsk ask;
  ask.global_batch = fuzz::size_in(d, 1, 4096);
  ask.tier = d.PickValueInArray({"safe", "balanced", "aggressive", "bogus"});
  if (d.ConsumeBool()) ask.budget = fuzz::fraction_in(d, 0.5, 1.0);
  ask.optimizer_fixed = ask.precision_fixed = ask.attention_fixed = true;
  ask.checkpointing_fixed = d.ConsumeBool();
  ask.no_offload = d.ConsumeBool();
  ask.max_micro_batch = d.ConsumeIntegralInRange<int64_t>(1, 16);
  try {
    const planner::PlanRequest req = planner::make_request(s, ask, nullptr);
    const planner::PlanResult r = planner::plan(req);
    if (r.found) {
      const planner::Candidate& c = r.best;
      if (!c.fits || c.peak_bytes > r.budget_bytes) fuzz::fail("plan's winner is over its budget");
      if (estimate(c.setup).verdict_bytes() != c.peak_bytes) fuzz::fail("plan's winner's peak is not estimate()'s");
      const __int128 gb = static_cast<__int128>(c.setup.batch.micro_batch) * c.setup.batch.grad_accum *
                          c.setup.parallel.data_parallel();
      if (gb != c.global_batch || c.global_batch <= 0) fuzz::fail("plan's global batch is not micro x accumulation x ranks");
    }
    // Replaying only the groups that could win gives what replaying every group gives (for one
    // input in four: the full search costs several times the plan's, and the target's 30 s in CI
    // are for the rest too).
    if (d.ConsumeIntegralInRange(0, 3) != 0) return 0;
    planner::PlanRequest all = req;
    all.resolve_all = true;
    const planner::PlanResult f = planner::plan(all);
    if (f.found != r.found) fuzz::fail("plan finds a plan with every group replayed and not without, or the reverse");
    if (f.found && (f.best.peak_bytes != r.best.peak_bytes || f.best.setup.batch.micro_batch != r.best.setup.batch.micro_batch ||
                    f.best.time.tokens_per_s != r.best.time.tokens_per_s || f.best.global_batch != r.best.global_batch))
      fuzz::fail("plan's pick differs with every group replayed");
    if (f.tiers.size() != r.tiers.size() || f.runners_up.size() != r.runners_up.size() || f.why_not != r.why_not)
      fuzz::fail("plan's tiers, runners-up or why_not differ with every group replayed");
    for (size_t i = 0; i < f.tiers.size(); ++i)
      if (f.tiers[i].found != r.tiers[i].found || f.tiers[i].best.peak_bytes != r.tiers[i].best.peak_bytes)
        fuzz::fail("a tier's plan differs with every group replayed");
    for (size_t i = 0; i < f.runners_up.size(); ++i)
      if (f.runners_up[i].why != r.runners_up[i].why) fuzz::fail("a runner-up differs with every group replayed");
  } catch (const InputError&) {
  }
  return 0;
}
