// Speed bars, in process: one estimate in microseconds, a plan over >= 100,000 candidate setups
// (issue 4), and the allocation replay's parts on examples/quickstart.yaml, the file the
// whole-process figures of bench/startup.sh time too: the unroll, the replay through the lean
// engine and through the reference model, one estimate and one plan with their replays made afresh
// (the replay memo emptied each time). Run: build/bench/memplan_bench
#include <benchmark/benchmark.h>

#include "estimator/allocator.h"
#include "estimator/estimate.h"
#include "estimator/sequence.h"
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

// examples/quickstart.yaml as `memplan estimate --config` reads it (MEMPLAN_SOURCE_DIR: the tree).
TrainingSetup quickstart() {
  profiles::SetupInputs in;
  in.config = std::string(MEMPLAN_SOURCE_DIR) + "/examples/quickstart.yaml";
  return profiles::build_setup(in).setup;
}

void BM_quickstart_unroll(benchmark::State& st) {
  const TrainingSetup s = quickstart();
  size_t events = 0;
  for (auto _ : st) events = allocation_sequence(s, 2).events.size();
  st.counters["events"] = static_cast<double>(events);
}
void BM_quickstart_replay(benchmark::State& st, bool lean) {
  const TrainingSetup s = quickstart();
  const AllocationSequence seq = allocation_sequence(s, 2);
  const AllocatorConfig c = allocator_config(s);
  for (auto _ : st) benchmark::DoNotOptimize(replay(seq.events, c, static_cast<int64_t>(seq.last_step_begin), /*segment_actions=*/!lean).peak_reserved);
  st.counters["events"] = static_cast<double>(seq.events.size());
}
void BM_quickstart_estimate(benchmark::State& st) {
  const TrainingSetup s = quickstart();
  for (auto _ : st) {
    forget_replays();
    benchmark::DoNotOptimize(estimate(s).peak_bytes());
  }
}
void BM_quickstart_plan(benchmark::State& st) {
  planner::PlanRequest req;
  req.base = quickstart();
  req.global_batch = 32;
  req.explain = true;  // what memplan plan asks (tiers and runners-up)
  int64_t candidates = 0;
  for (auto _ : st) {
    forget_replays();
    const planner::PlanResult r = planner::plan(req);
    candidates = r.candidates;
    benchmark::DoNotOptimize(r.best.peak_bytes);
  }
  st.counters["candidates"] = static_cast<double>(candidates);
}

}  // namespace

BENCHMARK(BM_quickstart_unroll)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_quickstart_replay, lean, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_quickstart_replay, model, false)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_quickstart_estimate)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_quickstart_plan)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_estimate, llama_3_8b, "llama-3-8b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_estimate, mixtral_8x7b, "mixtral-8x7b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_estimate_peak_cached, llama_3_8b, "llama-3-8b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_plan, llama_3_8b, "llama-3-8b")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_plan, gpt2_xl, "gpt2-xl")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_plan, mixtral_8x7b, "mixtral-8x7b")->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
