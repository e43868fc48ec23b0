// Speed bars (issue 4): one estimate in microseconds, and a plan over >= 100,000 candidate
// setups in under 100 ms on the project's 2-core machine. Run: build/bench/memplan_bench
#include <benchmark/benchmark.h>

#include "estimator/estimate.h"
#include "planner/plan.h"
#include "profiles/profiles.h"

using namespace memplan;

namespace {

TrainingSetup setup_for(const char* model, const char* gpu, int64_t gpus) {
  TrainingSetup s;
  s.model = profiles::load_model(model, Where());
  const auto& cat = profiles::gpu_catalog();
  profiles::apply_gpu(s, *cat.find(gpu), cat);
  s.parallel.num_gpus = gpus;
  s.precision = Precision::amp_bf16;
  s.batch.micro_batch = 4;
  s.batch.seq_len = 2048;
  return s;
}

void BM_estimate(benchmark::State& st, const char* model) {
  const TrainingSetup s = setup_for(model, "a100-80gb", 8);
  for (auto _ : st) benchmark::DoNotOptimize(estimate(s).peak_bytes());
}
void BM_estimate_peak_cached(benchmark::State& st, const char* model) {
  TrainingSetup s = setup_for(model, "a100-80gb", 8);
  const Timeline t = activation_timeline(s);
  const ParamSummary ps = summarize_parameters(s);
  int i = 0;
  for (auto _ : st) {
    s.parallel.zero_stage = (i++) % 4;
    benchmark::DoNotOptimize(estimate_peak(s, t, nullptr, &ps));
  }
}

// A grid of >= 100,000 candidates: micro-batch 1..128 x 5 checkpointing modes x up to 3
// attentions x 2-3 precisions x 8 ZeRO/offload combinations x 5 optimizers.
void BM_plan(benchmark::State& st, const char* model) {
  planner::PlanRequest req;
  req.base = setup_for(model, "h100-80gb", 8);
  req.global_batch = 1024;
  req.constraints.optimizers = {OptimizerKind::adamw, OptimizerKind::adamw_8bit, OptimizerKind::sgd_momentum, OptimizerKind::lion,
                                OptimizerKind::adafactor};
  int64_t candidates = 0;
  for (auto _ : st) {
    const planner::PlanResult r = planner::plan(req);
    candidates = r.candidates;
    benchmark::DoNotOptimize(r.best.peak_bytes);
  }
  st.counters["candidates"] = static_cast<double>(candidates);
}

}  // namespace

BENCHMARK_CAPTURE(BM_estimate, llama_3_8b, "llama-3-8b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_estimate, mixtral_8x7b, "mixtral-8x7b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_estimate_peak_cached, llama_3_8b, "llama-3-8b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_plan, llama_3_8b, "llama-3-8b")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_plan, gpt2_xl, "gpt2-xl")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_plan, mixtral_8x7b, "mixtral-8x7b")->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
