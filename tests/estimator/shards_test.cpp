// Sharded terms shrink with the GPU count (issue 53): on every fixture that shards something
// (DeepSpeed ZeRO, FSDP, torch's ZeroRedundancyOptimizer), the same setup on 1, 2, 4, 8 and 16
// data-parallel ranks (the micro-batch and accumulation unchanged) never holds more weights,
// master weights, optimizer states or gradients per GPU in any phase than on fewer ranks.
#include <doctest/doctest.h>

#include <string>

#include "estimator/estimate.h"
#include "profiles/profiles.h"
#include "tests/profiles/fixture_setups.h"

using namespace memplan;

TEST_CASE("more GPUs never raise a per-GPU sharded term, on every fixture that shards") {
  int families = 0, compared = 0;
  for (testing::FixtureSetup& f : testing::fixture_setups()) {
    TrainingSetup base = f.built.setup;
    const bool shards = base.parallel.zero_stage > 0 || base.parallel.fsdp != FsdpMode::none || base.parallel.zero_redundancy_optimizer;
    if (!shards) continue;
    CAPTURE(f.path);
    const int64_t mp = base.parallel.tensor_parallel * base.parallel.pipeline_parallel;
    ++families;
    bool have = false;
    MemoryBreakdown before;
    int64_t before_dp = 0;
    for (int64_t dp : {1, 2, 4, 8, 16}) {
      TrainingSetup s = base;
      s.parallel.num_gpus = dp * mp;
      if (!validate(s).empty()) continue;
      const Timeline t = activation_timeline(s, /*with_rows=*/false);
      const MemoryBreakdown m = compose(s, t, nullptr, /*with_text=*/false, nullptr, /*replay=*/false);
      if (have) {
        CAPTURE(before_dp);
        CAPTURE(dp);
        for (size_t p = 0; p < m.phases.size(); ++p) {
          const std::string phase = phase_name(m.phases[p].phase);
          CAPTURE(phase);
          for (Term term : {Term::weights, Term::master_weights, Term::optimizer_states, Term::gradients}) {
            const std::string name = term_name(term);
            CAPTURE(name);
            CHECK(m.phases[p][term] <= before.phases[p][term]);
          }
        }
        ++compared;
      }
      before = m;
      before_dp = dp;
      have = true;
    }
  }
  MESSAGE(families << " sharded fixtures, " << compared << " GPU-count steps compared");
  CHECK(families > 20);
}
