// memplan report: one self-contained HTML file (inline SVG and CSS, nothing fetched) that shows
// an estimate as pictures -- the breakdown against the card and its bands, the step's phases, peak
// memory against micro-batch and against sequence length, and the saved tensors per layer kind --
// and the same charts one at a time as SVG (--svg CHART) for docs. Torch-free: it reads a
// TrainingSetup and its MemoryBreakdown (estimator/) and re-estimates the sweeps itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimator/estimate.h"
#include "estimator/setup.h"

namespace memplan::report {

// One configuration of a plan (memplan plan's search), for the plan chart.
struct PlanRow {
  std::string label;   // "micro-batch 4 x 8 accumulation"
  std::string detail;  // "amp-bf16, adamw, full checkpointing, ZeRO-2"
  int64_t peak_bytes = 0;
  double tokens_per_s = 0;  // modelled
  bool best = false;        // the plan's pick
};

// One calibration probe (a saved `memplan calibrate --json`), for the probes chart: the device
// figure it measured, the uncalibrated estimate, and the estimate of a fit made without it.
struct ProbeRow {
  std::string name;  // "llama h1024 L4 b4 s1024 amp-bf16 none"
  int64_t measured = 0, estimated = 0, held_out = 0;
};

struct Input {
  TrainingSetup setup;
  MemoryBreakdown estimate;
  const Calibration* calibration = nullptr;  // re-used by the sweeps; may be null
  std::string title;                         // "llama-3.2-1b on rtx-3090"
  std::vector<std::string> lines;            // what the header says under the title (setup, runtime, verdict)
  std::string version;                       // memplan's
  // --plan: the best of each group the search found, fastest first (the pick marked), and the
  // budget they were held to. Empty: no plan chart.
  std::vector<PlanRow> plan;
  int64_t plan_budget_bytes = 0;
  std::string plan_note;  // "global batch 64 x 384 tokens, balanced tier (90%): 1,234 candidates, 56 fit"
  // --probes: the calibration's probes, and what the fit said. Empty: no probes chart.
  std::vector<ProbeRow> probes;
  std::string probes_note;
};

enum class Chart {
  breakdown,   // the peak's terms as one stacked bar against the capacity and the bands
  phases,      // forward, backward, optimizer step: each phase's peak, and its largest term
  micro_batch, // peak against micro-batch, the capacity and the largest micro-batch that fits
  seq_len,     // peak against sequence length, the same
  layers,      // the saved tensors of each layer kind (explain's table)
  plan,        // with --plan: the plan's candidates side by side, peak and modelled speed
  probes,      // with --probes: a calibration's probes, measured against estimated
  count
};
const char* to_string(Chart c);  // "breakdown", "phases", "micro-batch", "seq-len", "layers"
std::optional<Chart> parse_chart(const std::string& name);
std::vector<std::string> chart_names();

// One point of a sweep: the setup at `value`, its verdict bytes (the peak, or what the allocator
// replay needs) and whether that fits the target.
struct SweepPoint {
  int64_t value = 0;
  int64_t bytes = 0;
  bool fits = false;
};
// The micro-batches 1, 2, 4, ... (or sequence lengths 128, 256, ...) the chart shows: doubling
// until the capacity is well passed or the setup stops validating (a position table's end).
std::vector<SweepPoint> sweep(const Input& in, Chart which);

// A real run's memory over time (memplan watch's samples, the Python monitor's steps), for the
// run chart and its report. report/ does not read logs: cli/ turns a monitor log into this.
struct RunTrace {
  std::string title;               // "'python3 train.py'" or "monitor on cuda:0"
  std::vector<std::string> lines;  // what the header says (sampler, exit, peak, worst band)
  struct Point {
    double t = 0;
    int64_t bytes = 0;
  };
  struct Series {
    std::string name;  // "GPU0 NVIDIA H200", "process tree", "step peaks"
    std::vector<Point> points;
  };
  std::vector<Series> series;
  int64_t capacity_bytes = 0;  // 0: unknown
  Thresholds thresholds;
  struct Level {
    std::string name;  // "estimate (peak)", "estimate: backward"
    int64_t bytes = 0;
  };
  std::vector<Level> estimate;  // the estimate's phases (or its peak alone), drawn across
  struct Event {
    double t = 0;
    std::string what;  // "band:critical", "leak", "departure", "recommendation", "exit 0"
    std::string detail;
  };
  std::vector<Event> events;
  std::string version;
};
// The run chart: each series over time in GiB against the capacity, the bands and the estimate,
// with the events marked.
std::string run_svg(const RunTrace& r);
// The run's report: the chart and its events as a table.
std::string run_html(const RunTrace& r);

// One chart as a standalone SVG document (xmlns set), axes in GiB.
std::string svg(const Input& in, Chart c);
// The whole report: every chart, the terms table and the notes, as one HTML document.
std::string html(const Input& in);

}  // namespace memplan::report
