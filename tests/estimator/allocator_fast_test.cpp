// The lean replay engine (estimator/allocator_fast.h) against the caching-allocator model it
// stands in for: the same ReplayResult on random programs (sizes of every pool, frees in any
// order, capacities that force the free-and-retry path and out-of-memory errors, rounding
// divisions, peaks reset mid-way), on the allocation sequence of every H200 dev-set case and of
// every fixture configuration, and on those sequences capped below their peak; the capped replays
// forked from an uncapped one (replay_with_caps) against each made alone.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "estimator/allocator.h"
#include "estimator/allocator_fast.h"
#include "estimator/sequence.h"
#include "profiles/profiles.h"
#include "tests/profiles/fixture_setups.h"
#include "tests/profiles/h200_runs.h"

using namespace memplan;

namespace {

constexpr int64_t MiB = int64_t{1} << 20;

// Both engines on the same events; every field the lean one reports must agree.
void same_answer(const std::vector<AllocatorEvent>& ev, const AllocatorConfig& c, int64_t reset_at = -1) {
  const ReplayResult model = replay(ev, c, reset_at);                                  // CachingAllocatorModel
  const ReplayResult lean = replay(ev, c, reset_at, /*segment_actions=*/false);        // the lean engine
  CHECK(lean.ran == model.ran);
  CHECK(lean.oom_event == model.oom_event);
  CHECK(lean.peak_reserved == model.peak_reserved);
  CHECK(lean.peak_allocated == model.peak_allocated);
  CHECK(lean.num_alloc_retries == model.num_alloc_retries);
}

// The uncapped replay with capped ones forked from it (replay_with_caps) against each replayed
// alone by the model.
void same_forks(const std::vector<AllocatorEvent>& ev, const AllocatorConfig& c, int64_t reset_at, const std::vector<int64_t>& caps) {
  std::vector<ReplayResult> capped;
  const ReplayResult uncapped = replay_with_caps(ev, c, reset_at, caps, capped);
  AllocatorConfig free_cfg = c;
  free_cfg.capacity = 0;
  const ReplayResult alone = replay(ev, free_cfg, reset_at);
  CHECK(uncapped.ran == alone.ran);
  CHECK(uncapped.peak_reserved == alone.peak_reserved);
  CHECK(uncapped.peak_allocated == alone.peak_allocated);
  REQUIRE(capped.size() == caps.size());
  for (size_t k = 0; k < caps.size(); ++k) {
    CAPTURE(caps[k]);
    AllocatorConfig at = free_cfg;
    at.capacity = caps[k];
    at.capacity_is_fraction = false;
    const ReplayResult m = replay(ev, at, reset_at);
    CHECK(capped[k].ran == m.ran);
    CHECK(capped[k].oom_event == m.oom_event);
    CHECK(capped[k].peak_reserved == m.peak_reserved);
    CHECK(capped[k].peak_allocated == m.peak_allocated);
    CHECK(capped[k].num_alloc_retries == m.num_alloc_retries);
  }
}

// A random program: allocations drawn from a few sizes that repeat (as tensors do) and from
// anywhere in the three size classes, each freed after a random lifetime.
std::vector<AllocatorEvent> random_program(std::mt19937_64& rng, int allocs) {
  std::vector<int64_t> common;
  for (int i = 0; i < 6; ++i) common.push_back(std::uniform_int_distribution<int64_t>(1, 40 * MiB)(rng));
  std::vector<AllocatorEvent> ev;
  std::vector<int64_t> live;
  int64_t next_id = 0;
  for (int i = 0; i < allocs; ++i) {
    int64_t bytes = 0;
    switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
      case 0: bytes = std::uniform_int_distribution<int64_t>(0, MiB)(rng); break;             // small pool
      case 1: bytes = std::uniform_int_distribution<int64_t>(MiB + 1, 10 * MiB)(rng); break;  // 20 MiB segments
      case 2: bytes = std::uniform_int_distribution<int64_t>(10 * MiB, 200 * MiB)(rng); break;  // own segments
      default: bytes = common[std::uniform_int_distribution<size_t>(0, common.size() - 1)(rng)]; break;
    }
    AllocatorEvent a;
    a.kind = AllocatorEvent::alloc;
    a.id = next_id++;
    a.bytes = bytes;
    ev.push_back(a);
    live.push_back(a.id);
    while (!live.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      const size_t k = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      AllocatorEvent f;
      f.kind = AllocatorEvent::free;
      f.id = live[k];
      ev.push_back(f);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return ev;
}

}  // namespace

TEST_CASE("fast replay: which settings it covers") {
  AllocatorConfig c;
  CHECK(fast_replay::covers(c));
  c.roundup_power2_divisions = {4};
  CHECK(fast_replay::covers(c));
  c.capacity = 8 * MiB;
  CHECK(fast_replay::covers(c));
  for (int k = 0; k < 3; ++k) {
    AllocatorConfig d;
    if (k == 0) d.expandable_segments = true;
    if (k == 1) d.max_split_size = 64 * MiB;
    if (k == 2) d.gc_threshold = 0.5;
    CHECK_FALSE(fast_replay::covers(d));
  }
  // An event on another stream: the lean engine declines and replay() keeps the model's answer.
  std::vector<AllocatorEvent> ev(2);
  ev[0].bytes = 4 * MiB;
  ev[1].bytes = 4 * MiB;
  ev[1].id = 1;
  ev[1].stream = 1;
  ReplayResult out;
  out.peak_reserved = -7;
  CHECK_FALSE(fast_replay::run(ev, {0, 1}, 2, AllocatorConfig{}, -1, out));
  CHECK(out.peak_reserved == -7);
  same_answer(ev, AllocatorConfig{});
}

TEST_CASE("fast replay: random programs, every pool, capped and not") {
  std::mt19937_64 rng(20261206);
  int ooms = 0, retried = 0, capped = 0;
  for (int trial = 0; trial < 300; ++trial) {
    CAPTURE(trial);
    const std::vector<AllocatorEvent> ev = random_program(rng, std::uniform_int_distribution<int>(5, 400)(rng));
    AllocatorConfig c;
    if (trial % 5 == 1) c.roundup_power2_divisions = {std::vector<int>{2, 4, 8}[static_cast<size_t>(trial % 3)]};
    if (trial % 7 == 2) c.roundup_power2_divisions = {1, 4, 0, 8, 2};
    const ReplayResult free_run = replay(ev, c);
    const int64_t reset_at = trial % 3 == 0 ? static_cast<int64_t>(ev.size() / 2) : -1;
    same_answer(ev, c, reset_at);
    std::vector<int64_t> caps;
    for (double f : {1.5, 0.995, 0.95, 0.8, 0.5}) caps.push_back(std::max<int64_t>(1, static_cast<int64_t>(f * static_cast<double>(free_run.peak_reserved))));
    same_forks(ev, c, reset_at, caps);
    // Capacities below the free run's peak: the free-and-retry path, then out of memory.
    for (double f : {0.995, 0.95, 0.8, 0.5}) {
      AllocatorConfig cap = c;
      cap.capacity = static_cast<int64_t>(f * static_cast<double>(free_run.peak_reserved));
      cap.capacity_is_fraction = trial % 2 == 0;
      const ReplayResult m = replay(ev, cap);
      ++capped;
      ooms += m.ran ? 0 : 1;
      retried += m.ran && m.num_alloc_retries > 0 ? 1 : 0;
      same_answer(ev, cap, reset_at);
    }
  }
  // The random programs do reach the paths they are meant to check.
  MESSAGE("of " << capped << " capped replays, " << ooms << " ran out of memory and " << retried << " ran after freeing the cache");
  CHECK(ooms > 50);
  CHECK(retried > 20);
}

TEST_CASE("fast replay: the H200 dev set's and every fixture's allocation sequences") {
  std::vector<std::pair<std::string, TrainingSetup>> setups;
  std::ifstream in(std::string(MEMPLAN_TEST_DATA) + "/gpu/h200-loops.jsonl");
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json d = nlohmann::json::parse(line);
    if (!d.contains("case")) continue;
    const auto& c = d.at("case");
    try {
      setups.emplace_back(c.at("id").get<std::string>(), profiles::build_setup(testing::h200_loop_inputs(c)).setup);
    } catch (const std::exception&) {
      continue;  // a case memplan cannot express (sequence_test says which)
    }
  }
  const size_t dev = setups.size();
  for (testing::FixtureSetup& f : testing::fixture_setups()) setups.emplace_back(f.path, f.built.setup);
  int replayed = 0, dev_replayed = 0;
  for (size_t k = 0; k < setups.size(); ++k) {
    const std::string& name = setups[k].first;
    TrainingSetup& s = setups[k].second;
    CAPTURE(name);
    s.device.kind = DeviceKind::cuda;
    if (!sequence_not_modelled(s).empty()) continue;
    const AllocationSequence seq = allocation_sequence(s, 2, 250'000);
    if (seq.events.empty()) continue;  // longer than the estimate's replay budget
    ++replayed;
    dev_replayed += k < dev ? 1 : 0;
    const AllocatorConfig c = allocator_config(s);
    same_answer(seq.events, c, static_cast<int64_t>(seq.last_step_begin));
    // Below the peak: where the estimate asks whether the step runs in the target's share.
    const ReplayResult free_run = replay(seq.events, c, -1, false);
    std::vector<int64_t> caps;
    for (double f : {0.97, 0.9}) {
      AllocatorConfig capped = c;
      capped.capacity = static_cast<int64_t>(f * static_cast<double>(free_run.peak_reserved));
      capped.capacity_is_fraction = false;
      same_answer(seq.events, capped);
      caps.push_back(capped.capacity);
    }
    same_forks(seq.events, c, static_cast<int64_t>(seq.last_step_begin), caps);
  }
  MESSAGE(replayed << " sequences replayed by both engines: " << dev_replayed << " of " << dev << " dev-set cases, " << replayed - dev_replayed
                  << " of " << setups.size() - dev << " fixtures read");
  CHECK(replayed >= 40);
}
