// Validation against the public record (issue 6, point 3). examples/published/published.yaml lists
// fine-tuning setups from published tables whose configuration is fully stated; each names a
// memplan config, the published peak in bytes, and what kind of number it is. This suite builds
// each setup exactly as `memplan estimate --config` does, estimates it, maps the estimate to the
// published kind (comparable_bytes below), prints one table row per case and checks the relative
// error against the case's tolerance. Cases with a diagnosed estimator gap (known_gap) are checked
// in a separate test case marked may_fail, so they stay visible without failing the build.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "estimator/estimate.h"
#include "profiles/profiles.h"

using namespace memplan;

namespace {

const std::string kDir = std::string(MEMPLAN_EXAMPLES) + "/published/";

enum class Kind { allocated, active, reserved, device_used };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::allocated: return "allocated";
    case Kind::active: return "active";
    case Kind::reserved: return "reserved";
    case Kind::device_used: return "device_used";
  }
  return "?";
}

// What a published number contains, in the estimate's terms (all at the peak phase):
//   allocated   = torch.cuda.max_memory_allocated(): every tensor the caching allocator handed
//                 out, the cuBLAS workspace included (torch 2.x allocates it there), but neither
//                 the CUDA context (outside the allocator) nor the allocator's rounding and
//                 fragmentation (reserved but not allocated):  peak - cuda_context - allocator_overhead
//   active      = memory_stats()["active_bytes.all.peak"] (torchtune's "Peak Memory Active"): the
//                 allocated blocks plus blocks already freed but still waiting for work queued on
//                 another stream (record_stream: activation offloading's copy streams, FSDP's
//                 all-gather streams). memplan models no cross-stream delay, so an active peak is
//                 compared with the same estimate as an allocated one:  peak - cuda_context - allocator_overhead
//   reserved    = torch.cuda.max_memory_reserved(): the allocator's segments:   peak - cuda_context
//   device_used = nvidia-smi / NVML used: the whole process, context included:  peak
int64_t comparable_bytes(const MemoryBreakdown& b, Kind kind) {
  const PhaseState& p = b.peak();
  const int64_t peak = p.total();
  switch (kind) {
    case Kind::allocated: case Kind::active: return peak - p[Term::cuda_context] - p[Term::allocator_overhead];
    case Kind::reserved: return peak - p[Term::cuda_context];
    case Kind::device_used: return peak;
  }
  return peak;
}

struct Case {
  std::string config;
  std::string published_text;
  int64_t published_bytes = 0;
  Kind kind = Kind::device_used;
  std::string source;
  double tolerance = 0.10;
  int64_t context_bytes = -1;  // the source's own measurement of the CUDA context
  YAML::Node overrides;
  std::string known_gap;
};

std::vector<Case> load_cases() {
  const YAML::Node root = YAML::LoadFile(kDir + "published.yaml");
  std::vector<Case> out;
  for (const YAML::Node& n : root["cases"]) {
    Case c;
    c.config = n["config"].as<std::string>();
    c.published_text = n["published_text"] ? n["published_text"].as<std::string>() : "";
    c.published_bytes = n["published_bytes"].as<int64_t>();
    const std::string k = n["kind"].as<std::string>();
    if (k == "allocated") c.kind = Kind::allocated;
    else if (k == "active") c.kind = Kind::active;
    else if (k == "reserved") c.kind = Kind::reserved;
    else if (k == "device_used") c.kind = Kind::device_used;
    else FAIL("unknown kind '" << k << "' for " << c.config);
    c.source = n["source"].as<std::string>();
    c.tolerance = n["tolerance"].as<double>();
    if (n["cuda_context_bytes"]) c.context_bytes = n["cuda_context_bytes"].as<int64_t>();
    if (n["known_gap"]) c.known_gap = n["known_gap"].as<std::string>();
    out.push_back(c);
  }
  return out;
}

struct Result {
  const Case* c = nullptr;
  int64_t estimate = 0;
  double error = 0;  // (estimate - published) / published
  std::string phase;
  // The error with memplan's own planning context instead of the source's measured one (only
  // when published.yaml gives cuda_context_bytes): shows how much the substitution matters.
  bool own_context = false;
  double error_own_context = 0;
};

Result run_case(const Case& c) {
  profiles::SetupInputs in;
  in.config = kDir + c.config;
  profiles::BuiltSetup b = profiles::build_setup(in);
  REQUIRE(validate(b.setup).empty());
  Calibration cal;  // only the context: every other field keeps its "no correction" default
  cal.device = "published source";
  cal.cuda_context_bytes = c.context_bytes;
  const MemoryBreakdown m = c.context_bytes >= 0 ? estimate(b.setup, &cal) : estimate(b.setup);
  Result r;
  r.c = &c;
  r.estimate = comparable_bytes(m, c.kind);
  r.error = static_cast<double>(r.estimate - c.published_bytes) / static_cast<double>(c.published_bytes);
  r.phase = phase_name(m.peak_phase());
  if (c.context_bytes >= 0) {
    r.own_context = true;
    r.error_own_context = static_cast<double>(comparable_bytes(estimate(b.setup), c.kind) - c.published_bytes) /
                          static_cast<double>(c.published_bytes);
  }
  // MEMPLAN_PUBLISHED_TERMS=1 also prints every term at the peak (MiB), for diagnosing a case.
  if (std::getenv("MEMPLAN_PUBLISHED_TERMS")) {
    std::printf("  %s at %s:", c.config.c_str(), m.peak().at.c_str());
    for (int i = 0; i < kNumTerms; ++i)
      if (m.peak().bytes[i]) std::printf(" %s=%.0f", term_name(term_at(i)), m.peak().bytes[i] / 1048576.0);
    std::printf(" MiB\n");
  }
  return r;
}

void print_table(const char* title, const std::vector<Result>& rows) {
  std::printf("\n%s\n", title);
  std::printf("%-60s %-11s %12s %12s %8s %5s  %-15s %s\n", "config", "kind", "published", "estimate", "error", "tol",
              "peak phase", "note");
  for (const Result& r : rows) {
    char note[96] = "";
    if (r.own_context)
      std::snprintf(note, sizeof note, "source's context; memplan's default: %+.1f%%", 100.0 * r.error_own_context);
    std::printf("%-60s %-11s %9.2f GiB %9.2f GiB %+7.1f%% %4.0f%%  %-15s %s%s\n", r.c->config.c_str(),
                kind_name(r.c->kind), r.c->published_bytes / 1073741824.0, r.estimate / 1073741824.0, 100.0 * r.error,
                100.0 * r.c->tolerance, r.phase.c_str(), note, std::fabs(r.error) <= r.c->tolerance ? "" : "  OUTSIDE");
  }
  std::fflush(stdout);
}

void check_cases(bool with_gap, const char* title) {
  const std::vector<Case> cases = load_cases();
  std::vector<Result> rows;
  for (const Case& c : cases)
    if (c.known_gap.empty() != with_gap) rows.push_back(run_case(c));
  print_table(title, rows);
  for (const Result& r : rows) {
    std::string what = r.c->config + ": published " + r.c->published_text + " (" + kind_name(r.c->kind) +
                       "), estimate " + std::to_string(r.estimate) + " B, error " + std::to_string(100.0 * r.error) +
                       "%, source " + r.c->source;
    if (!r.c->known_gap.empty()) what += "; known gap: " + r.c->known_gap;
    INFO(what);
    CHECK(std::fabs(r.error) <= r.c->tolerance);
  }
}

}  // namespace

TEST_CASE("published.yaml lists at least 10 fully described cases") {
  const std::vector<Case> cases = load_cases();
  CHECK(cases.size() >= 10);
  for (const Case& c : cases) {
    INFO(c.config);
    CHECK(std::filesystem::exists(kDir + c.config));
    CHECK(c.published_bytes > 0);
    CHECK(c.source.rfind("https://", 0) == 0);
    CHECK(c.tolerance > 0);
    CHECK(c.tolerance <= 0.25);
  }
}

TEST_CASE("published setups: estimate within tolerance") {
  check_cases(false, "published setups (estimate mapped to the published kind; error = estimate/published - 1)");
}

TEST_CASE("published setups with a diagnosed estimator gap" * doctest::may_fail()) {
  check_cases(true, "published setups with a known gap (see known_gap in examples/published/published.yaml)");
}
