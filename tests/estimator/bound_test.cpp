// verdict_bound() (estimate.h): the bound without the allocation replay that the planner's searches
// decide most candidates by. It must never be above the verdict the replay gives, must be the
// verdict where it says it is exact, and must say "does not run" only where judge() says so; and
// step_runs(), fit's "does it run at all" from capped replays alone, must be judge()'s answer; checked
// on every fixture configuration at several micro-batches and on every card of the catalog, where
// the replay's capped paths (the step squeezed into the target's share, or out of memory) are
// reached.
#include <doctest/doctest.h>

#include <string>

#include "estimator/breakdown.h"
#include "estimator/estimate.h"
#include "estimator/sequence.h"
#include "profiles/profiles.h"
#include "tests/profiles/fixture_setups.h"

using namespace memplan;

TEST_CASE("verdict bound: below the replayed verdict, exact where it says so, on every fixture and card") {
  const auto& cat = profiles::gpu_catalog();
  int checked = 0, replayed = 0, tight = 0, squeezed = 0, runs_false = 0;
  for (testing::FixtureSetup& f : testing::fixture_setups()) {
    CAPTURE(f.path);
    TrainingSetup base = f.built.setup;
    base.device.kind = DeviceKind::cuda;
    for (const char* gpu : {"", "rtx-3060-12gb", "a100-80gb"}) {
      TrainingSetup s = base;
      if (*gpu) profiles::apply_gpu(s, *cat.find(gpu), cat);
      for (int64_t b : {int64_t{1}, base.batch.micro_batch, 2 * base.batch.micro_batch + 1}) {
        s.batch.micro_batch = b;
        if (!validate(s).empty()) continue;
        CAPTURE(gpu);
        CAPTURE(b);
        const Timeline t = activation_timeline(s, /*with_rows=*/false);
        const VerdictBound v = verdict_bound(s, t, nullptr);
        forget_replays();  // step_runs from nothing remembered: its own capped replays
        const bool runs = step_runs(s, t, nullptr);
        const MemoryBreakdown m = compose(s, t, nullptr, /*with_text=*/false, nullptr);
        CHECK(runs == judge(m, s).runs);
        runs_false += runs ? 0 : 1;
        ++checked;
        replayed += m.allocator_replayed ? 1 : 0;
        squeezed += m.needed_bytes >= 0 ? 1 : 0;
        CHECK(v.lower <= m.verdict_bytes());
        CHECK(v.host_bytes == m.host_bytes());
        if (v.exact) CHECK(v.lower == m.verdict_bytes());
        if (v.exact) CHECK_FALSE(m.allocator_replayed);
        if (v.runs == 0) CHECK_FALSE(judge(m, s).runs);
        if (m.allocator_replayed && v.lower > 0 && m.verdict_bytes() < v.lower * 1.01) ++tight;
      }
    }
  }
  MESSAGE(checked << " setups checked, " << replayed << " replayed (" << squeezed << " squeezed into the target's share, " << tight
                  << " within 1% of the bound); " << runs_false << " do not run on their card");
  CHECK(replayed > 100);
  CHECK(squeezed > 0);
  CHECK(runs_false > 50);
}
