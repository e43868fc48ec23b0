// The report's charts (report.h). Every chart is plain SVG written here: rectangles, lines and text
// with the sizes in GiB, no script, no font or style sheet fetched. Colours are picked to stay
// apart when printed in grey (their lightness differs step by step) and every coloured thing is
// also named in text (a legend row or a label), so nothing depends on telling hues apart.
#include "report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "estimator/breakdown.h"
#include "estimator/error.h"
#include "estimator/text.h"

namespace memplan::report {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kWidth = 900;

// One colour per term, darkest to lightest in grey (luminance falls by ~8% a step), so adjacent
// terms of a stacked bar differ in grey as well as in hue.
constexpr const char* kTermColours[kNumTerms] = {
    "#1b3a5c",  // weights
    "#8c2d04",  // gradients
    "#3f6e3a",  // master_weights
    "#5b4a8b",  // optimizer_states
    "#c2571a",  // activations
    "#3e8fb0",  // logits_and_loss
    "#8a8a3a",  // transient
    "#b07aa1",  // workspace
    "#9c9c9c",  // cuda_context
    "#e3b23c",  // allocator_overhead
    "#bcd4e6",  // comm_buffers
};
// The bands' lines: darker as they get worse, dashed differently so they read without colour.
struct BandLine {
  double Thresholds::*at;
  const char* name;
  const char* colour;
  const char* dash;
};
constexpr BandLine kBandLines[] = {
    {&Thresholds::target, "target", "#2b7a2b", "6 3"},
    {&Thresholds::warning, "warning", "#b58900", "4 3"},
    {&Thresholds::critical, "critical", "#cb4b16", "2 2"},
    {&Thresholds::emergency, "emergency", "#8b0000", "1 2"},
};

constexpr const char* kStyle =
    "body { font-family: DejaVu Sans, Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 940px; color: #111; }\n"
    "h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }\n"
    "figure { margin: 8px 0 20px 0; } figcaption { font-size: 13px; color: #333; }\n"
    "table { border-collapse: collapse; font-size: 13px; } td, th { padding: 2px 10px; border-bottom: 1px solid #ddd; }\n"
    "td.n { text-align: right; font-variant-numeric: tabular-nums; } .meta { font-size: 13px; color: #333; }\n"
    "svg { max-width: 100%; height: auto; }\n"
    "@media print { body { margin: 0; } }\n";

std::string esc(const std::string& s) { return text::xml_text(s); }
double gib_of(int64_t b) { return static_cast<double>(b) / kGiB; }
std::string gib(int64_t b) { return text::gib(b); }
std::string pct(double f) { return fmt::format("{:.0f}%", 100.0 * f); }

// A "nice" axis top at or above `v`: 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten (five
// ticks then fall on round numbers).
double nice_top(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  if (!(p > 0) || !std::isfinite(p)) return v;  // past double's range of powers of ten: v itself
  for (const double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (m * p >= v) return m * p;
  return 10.0 * p;
}

std::string open_svg(int height, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n<title>{2}</title>\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n",
      kWidth, height, esc(title));
}

std::string text_at(double x, double y, const std::string& s, const char* anchor = "start", const char* extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\"{}>{}</text>\n", x, y, anchor, extra, esc(s));
}

std::string line(double x1, double y1, double x2, double y2, const char* colour, const char* dash = "", double w = 1.5) {
  return fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n", x1, y1, x2,
                     y2, colour, w, *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : "");
}

std::string rect(double x, double y, double w, double h, const char* fill, const std::string& tip) {
  return fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"#ffffff\" "
                     "stroke-width=\"0.5\"><title>{}</title></rect>\n",
                     x, y, std::max(0.0, w), std::max(0.0, h), fill, esc(tip));
}

// The terms present in any phase, in Term order (a legend lists only these).
std::vector<int> present_terms(const MemoryBreakdown& e) {
  std::vector<int> out;
  for (int i = 0; i < kNumTerms; ++i)
    for (const PhaseState& ph : e.phases)
      if (ph.bytes[i] > 0) {
        out.push_back(i);
        break;
      }
  return out;
}

std::string legend(const std::vector<int>& terms, double y) {
  std::string s;
  double x = 20;
  for (const int i : terms) {
    const std::string name = term_name(term_at(i));
    const double w = 22 + 7.0 * static_cast<double>(name.size());
    if (x + w > kWidth - 10) {
      x = 20;
      y += 18;
    }
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", x, y - 10, kTermColours[i]);
    s += text_at(x + 16, y, name);
    x += w;
  }
  return s;
}

double capacity_of(const TrainingSetup& s) { return static_cast<double>(s.device.capacity_bytes); }

// ---- the breakdown: one stacked bar, the bands, allocated / reserved / device apart -----------------

std::string breakdown_svg(const Input& in) {
  const TrainingSetup& s = in.setup;
  const MemoryBreakdown& e = in.estimate;
  const PhaseState& pk = e.peak();
  const double cap = capacity_of(s);
  const double top = std::max(cap, static_cast<double>(pk.total())) * 1.04;
  const double x0 = 150, x1 = kWidth - 20;
  const auto X = [&](double bytes) { return x0 + (x1 - x0) * bytes / top; };
  const std::vector<int> terms = present_terms(e);
  std::string g = open_svg(300, fmt::format("{}: memory at the peak ({}) against the card", in.title, phase_name(pk.phase)));
  g += text_at(20, 22, fmt::format("peak {} at {} ({})", gib(pk.total()), phase_name(pk.phase), pk.at), "start", " font-weight=\"bold\"");
  g += text_at(x0 - 8, 66, "terms", "end");
  // The stacked bar.
  double at = 0;
  for (int i = 0; i < kNumTerms; ++i) {
    const int64_t b = pk.bytes[i];
    if (b <= 0) continue;
    const double w = X(at + static_cast<double>(b)) - X(at);
    g += rect(X(at), 40, w, 44, kTermColours[i], fmt::format("{}: {}", term_name(term_at(i)), gib(b)));
    if (w > 60) g += text_at(X(at) + w / 2, 66, gib(b), "middle", " fill=\"#ffffff\" font-size=\"11\"");
    at += static_cast<double>(b);
  }
  // Allocated, reserved and the device figure as three bars under it.
  // (allocated: torch.cuda.memory_allocated, the tensors; reserved: memory_reserved, the caching
  // allocator's segments; device: reserved plus the CUDA context, what nvidia-smi shows.)
  const struct {
    const char* name;
    int64_t bytes;
  } figures[] = {{"allocated", pk.allocated()}, {"reserved", pk.reserved()}, {"device", pk.total()}};
  double y = 104;
  for (const auto& f : figures) {
    g += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"10\" fill=\"#7a7a7a\"><title>{} {}</title></rect>\n", x0,
                     y - 9, X(static_cast<double>(f.bytes)) - x0, f.name, gib(f.bytes));
    g += text_at(x0 - 8, y, fmt::format("{} {}", f.name, gib(f.bytes)), "end", " font-size=\"11\"");
    y += 18;
  }
  // The bands and the capacity.
  if (cap > 0) {
    double ly = 172;
    for (const BandLine& b : kBandLines) {
      const double f = s.thresholds.*b.at;
      g += line(X(f * cap), 32, X(f * cap), 150, b.colour, b.dash);
      g += text_at(X(f * cap), ly, fmt::format("{} {} ({})", pct(f), b.name, gib(static_cast<int64_t>(f * cap))), "end", " font-size=\"11\"");
      ly += 14;
    }
    g += line(X(cap), 28, X(cap), 150, "#000000", "", 2.5);
    g += text_at(X(cap), ly, fmt::format("capacity {} ({})", gib(s.device.capacity_bytes), s.device.name), "end", " font-weight=\"bold\"");
  } else {
    g += text_at(x1, 172, "capacity unknown: pass --gpu or --gpu-memory for the bands", "end");
  }
  g += legend(terms, 258);
  g += "</svg>\n";
  return g;
}

// The capacity (a heavy line) and the target (dashed) across a chart whose y axis is GiB; `y_cap`
// and `y_target` are their heights.
std::string capacity_and_target(const TrainingSetup& s, double x0, double x1, double y_cap, double y_target) {
  std::string g = line(x0, y_cap, x1, y_cap, "#000000", "", 2.5);
  g += text_at(x1, y_cap - 5, fmt::format("capacity {}", gib(s.device.capacity_bytes)), "end", " font-weight=\"bold\"");
  g += line(x0, y_target, x1, y_target, kBandLines[0].colour, kBandLines[0].dash);
  g += text_at(x1, y_target + 14, fmt::format("{} target", pct(s.thresholds.target)), "end", " font-size=\"11\"");
  return g;
}

// ---- the phases: a stacked column per phase -----------------------------------------------------

std::string gib_axis(double x0, double y0, double x1, double y1, double top_gib) {
  std::string g = line(x0, y0, x0, y1, "#000000", "", 1);
  for (int k = 0; k <= 5; ++k) {
    const double v = top_gib * k / 5.0;
    const double y = y0 - (y0 - y1) * k / 5.0;
    g += line(x0 - 4, y, x1, y, k == 0 ? "#000000" : "#dddddd", "", 1);
    g += text_at(x0 - 6, y + 4, fmt::format("{:g}", std::round(v * 100) / 100), "end", " font-size=\"11\"");
  }
  g += text_at(x0 - 44, (y0 + y1) / 2, "GiB", "middle", fmt::format(" transform=\"rotate(-90 {:.1f} {:.1f})\"", x0 - 44, (y0 + y1) / 2).c_str());
  return g;
}

std::string phases_svg(const Input& in) {
  const TrainingSetup& s = in.setup;
  const MemoryBreakdown& e = in.estimate;
  const double cap = capacity_of(s);
  int64_t most = 0;
  for (const PhaseState& ph : e.phases) most = std::max(most, ph.total());
  const double top_gib = nice_top(std::max(gib_of(static_cast<int64_t>(cap)), gib_of(most)) * 1.05);
  const double x0 = 70, x1 = kWidth - 20, y0 = 300, y1 = 40;
  const auto Y = [&](double bytes) { return y0 - (y0 - y1) * (bytes / kGiB) / top_gib; };
  std::string g = open_svg(420, fmt::format("{}: each phase's peak", in.title));
  g += gib_axis(x0, y0, x1, y1, top_gib);
  const double slot = (x1 - x0) / static_cast<double>(std::max<size_t>(1, e.phases.size()));
  for (size_t p = 0; p < e.phases.size(); ++p) {
    const PhaseState& ph = e.phases[p];
    const double cx = x0 + slot * (static_cast<double>(p) + 0.5), w = std::min(140.0, slot * 0.5);
    double at = 0;
    int largest = 0;
    for (int i = 0; i < kNumTerms; ++i) {
      if (ph.bytes[i] > ph.bytes[largest]) largest = i;
      if (ph.bytes[i] <= 0) continue;
      g += rect(cx - w / 2, Y(at + static_cast<double>(ph.bytes[i])), w, Y(at) - Y(at + static_cast<double>(ph.bytes[i])),
                kTermColours[i], fmt::format("{} at the {} peak: {}", term_name(term_at(i)), phase_name(ph.phase), gib(ph.bytes[i])));
      at += static_cast<double>(ph.bytes[i]);
    }
    const bool peak = &ph == &e.peak();
    g += text_at(cx, Y(at) - 6, gib(ph.total()) + (peak ? " (peak)" : ""), "middle", peak ? " font-weight=\"bold\"" : "");
    g += text_at(cx, y0 + 18, phase_name(ph.phase), "middle", " font-weight=\"bold\"");
    g += text_at(cx, y0 + 34, fmt::format("largest: {} {}", term_name(term_at(largest)), gib(ph.bytes[largest])), "middle", " font-size=\"11\"");
    std::string where = ph.at;
    if (where.size() > 48) where = where.substr(0, 45) + "...";
    g += text_at(cx, y0 + 48, "at " + where, "middle", " font-size=\"10\"");
  }
  if (cap > 0) g += capacity_and_target(s, x0, x1, Y(cap), Y(s.thresholds.target * cap));
  g += legend(present_terms(e), 384);
  g += "</svg>\n";
  return g;
}

// ---- sweeps: peak against micro-batch and sequence length ---------------------------------------------

std::string sweep_svg(const Input& in, Chart which) {
  const TrainingSetup& s = in.setup;
  const std::vector<SweepPoint> pts = sweep(in, which);
  const bool mb = which == Chart::micro_batch;
  const char* what = mb ? "micro-batch" : "sequence length";
  const double cap = capacity_of(s);
  int64_t most = 0;
  for (const SweepPoint& p : pts) most = std::max(most, p.bytes);
  const double top_gib = nice_top(std::max(gib_of(static_cast<int64_t>(cap)), gib_of(most)) * 1.05);
  const double x0 = 70, x1 = kWidth - 30, y0 = 260, y1 = 40;
  const auto Y = [&](double bytes) { return y0 - (y0 - y1) * (bytes / kGiB) / top_gib; };
  std::string g = open_svg(340, fmt::format("{}: peak against {}", in.title, what));
  g += gib_axis(x0, y0, x1, y1, top_gib);
  const size_t n = pts.size();
  const auto X = [&](size_t i) { return x0 + 30 + (x1 - x0 - 60) * (n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.5); };
  std::string poly;
  const SweepPoint* best = nullptr;
  size_t best_i = 0;
  for (size_t i = 0; i < n; ++i) {
    poly += fmt::format("{:.1f},{:.1f} ", X(i), std::max(y1 - 20, Y(static_cast<double>(pts[i].bytes))));
    if (pts[i].fits) {
      best = &pts[i];
      best_i = i;
    }
    g += text_at(X(i), y0 + 18, std::to_string(pts[i].value), "middle", " font-size=\"11\"");
  }
  g += text_at((x0 + x1) / 2, y0 + 38, what, "middle", " font-weight=\"bold\"");
  if (!poly.empty()) g += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1b3a5c\" stroke-width=\"2\"/>\n", poly);
  for (size_t i = 0; i < n; ++i) {
    const double y = std::max(y1 - 20, Y(static_cast<double>(pts[i].bytes)));
    g += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" stroke=\"#1b3a5c\"><title>{} {}: {}{}</title></circle>\n", X(i),
                     y, pts[i].fits ? "#1b3a5c" : "#ffffff", what, pts[i].value, gib(pts[i].bytes), pts[i].fits ? " (fits)" : "");
  }
  if (cap > 0) g += capacity_and_target(s, x0, x1, Y(cap), Y(s.thresholds.target * cap));
  if (best) {
    const double y = Y(static_cast<double>(best->bytes));
    g += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"8\" fill=\"none\" stroke=\"#2b7a2b\" stroke-width=\"2.5\"/>\n", X(best_i), y);
    g += text_at(X(best_i) + (best_i + 1 < n ? 12 : -12), y + 22, fmt::format("largest that fits: {} ({})", best->value, gib(best->bytes)),
                 best_i + 1 < n ? "start" : "end", " font-weight=\"bold\"");
  } else if (cap > 0) {
    g += text_at((x0 + x1) / 2, y1 - 8, fmt::format("no {} shown fits the {} target", what, pct(s.thresholds.target)), "middle",
                 " font-weight=\"bold\"");
  }
  g += text_at(x0, 330, fmt::format("filled: fits the target; hollow: over it. The rest as given ({} {}).", mb ? "sequence" : "micro-batch",
                                    mb ? s.batch.seq_len : s.batch.micro_batch),
               "start", " font-size=\"11\"");
  g += "</svg>\n";
  return g;
}

// ---- the saved tensors of each layer kind ------------------------------------------------------

// A layer kind with more rows than this (a MoE layer lists every expert's tensors) shows its
// largest rows and one row for the rest.
constexpr size_t kMaxRowsPerKind = 16;

std::vector<SavedTensor> chart_rows(const std::vector<SavedTensor>& all) {
  std::vector<SavedTensor> out;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].layer == all[i].layer) ++j;
    if (j - i <= kMaxRowsPerKind) {
      out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(i), all.begin() + static_cast<std::ptrdiff_t>(j));
    } else {
      // The kMaxRowsPerKind - 1 largest, in their own order, then the rest summed.
      std::vector<size_t> idx;
      for (size_t k = i; k < j; ++k) idx.push_back(k);
      std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return all[a].bytes > all[b].bytes; });
      idx.resize(kMaxRowsPerKind - 1);
      std::sort(idx.begin(), idx.end());
      int64_t shown = 0;
      for (size_t k : idx) {
        out.push_back(all[k]);
        shown += all[k].bytes;
      }
      int64_t total = 0;
      for (size_t k = i; k < j; ++k) total += all[k].bytes;
      out.push_back({all[i].layer, fmt::format("{} more tensors", j - i - idx.size()), total - shown, "activation"});
    }
    i = j;
  }
  return out;
}

std::string layers_svg(const Input& in) {
  const std::vector<SavedTensor> rows = chart_rows(in.estimate.saved_per_layer);
  const int row_h = 18;
  const int height = 60 + row_h * static_cast<int>(std::max<size_t>(1, rows.size())) + 30;
  std::string g = open_svg(height, fmt::format("{}: tensors autograd saves, per layer kind", in.title));
  g += text_at(20, 22, "saved for backward, one layer of each kind (memplan explain lists the same)", "start", " font-weight=\"bold\"");
  int64_t most = 1;
  for (const SavedTensor& t : rows) most = std::max(most, t.bytes);
  const double x0 = 330, x1 = kWidth - 120;
  double y = 50;
  std::string last;
  for (const SavedTensor& t : rows) {
    const char* fill = t.category == "loss" ? kTermColours[static_cast<int>(Term::logits_and_loss)]
                       : t.category == "weight_copy" ? kTermColours[static_cast<int>(Term::transient)]
                                                     : kTermColours[static_cast<int>(Term::activations)];
    std::string label = (t.layer != last ? t.layer + ": " : std::string("  ")) + t.op;
    if (label.size() > 48) label = label.substr(0, 45) + "...";
    last = t.layer;
    g += text_at(x0 - 8, y + 12, label, "end", " font-size=\"11\"");
    const double w = (x1 - x0) * static_cast<double>(t.bytes) / static_cast<double>(most);
    g += rect(x0, y, w, row_h - 4, fill, fmt::format("{} {}: {} ({})", t.layer, t.op, gib(t.bytes), t.category));
    g += text_at(x0 + w + 6, y + 12, gib(t.bytes), "start", " font-size=\"11\"");
    y += row_h;
  }
  if (rows.empty()) g += text_at(20, y + 12, "no saved tensors (nothing trains)");
  g += text_at(20, y + 24, "bars: activation (orange), loss (blue), weight copy (olive); the label names each", "start", " font-size=\"11\"");
  g += "</svg>\n";
  return g;
}

// ---- a plan's candidates side by side ------------------------------------------------------------

std::string plan_svg(const Input& in) {
  const std::vector<PlanRow>& rows = in.plan;
  const double cap = capacity_of(in.setup);
  const int row_h = 38;
  const int height = 86 + row_h * static_cast<int>(std::max<size_t>(1, rows.size())) + 24;
  std::string g = open_svg(height, fmt::format("{}: the plan's candidates", in.title));
  g += text_at(20, 22, in.plan_note.empty() ? "the best configuration of each kind the plan found, fastest first" : in.plan_note, "start",
               " font-weight=\"bold\"");
  // Two panels: the peak against the budget and the card, and the modelled tokens/s.
  const double m0 = 360, m1 = 620, s0 = 660, s1 = kWidth - 20, top = 56;
  int64_t most = std::max<int64_t>(in.plan_budget_bytes, static_cast<int64_t>(cap));
  double fastest = 0;
  for (const PlanRow& r : rows) {
    most = std::max(most, r.peak_bytes);
    fastest = std::max(fastest, r.tokens_per_s);
  }
  const auto M = [&](double b) { return m0 + (m1 - m0) * b / (static_cast<double>(most) * 1.04); };
  const auto S = [&](double v) { return s0 + (s1 - s0 - 60) * (fastest > 0 ? v / fastest : 0); };
  g += text_at(m0, top - 10, "peak (GiB)", "start", " font-size=\"11\" font-weight=\"bold\"");
  g += text_at(s0, top - 10, "modelled tokens/s", "start", " font-size=\"11\" font-weight=\"bold\"");
  double y = top;
  for (size_t i = 0; i < rows.size(); ++i) {
    const PlanRow& r = rows[i];
    const char* weight = r.best ? " font-weight=\"bold\"" : "";
    std::string label = fmt::format("{}. {}{}", i + 1, r.label, r.best ? " (the pick)" : "");
    if (label.size() > 52) label = label.substr(0, 49) + "...";
    std::string detail = r.detail;
    if (detail.size() > 58) detail = detail.substr(0, 55) + "...";
    g += text_at(20, y + 13, label, "start", fmt::format(" font-size=\"11\"{}", weight).c_str());
    g += text_at(20, y + 27, detail, "start", " font-size=\"10\" fill=\"#333333\"");
    const char* fill = r.best ? kTermColours[0] : kTermColours[static_cast<int>(Term::logits_and_loss)];
    g += rect(m0, y + 6, M(static_cast<double>(r.peak_bytes)) - m0, 20, fill, fmt::format("{}: peak {}", r.label, gib(r.peak_bytes)));
    g += text_at(M(static_cast<double>(r.peak_bytes)) + 4, y + 20, gib(r.peak_bytes), "start", " font-size=\"10\"");
    g += rect(s0, y + 6, S(r.tokens_per_s) - s0, 20, fill, fmt::format("{}: {:.0f} tokens/s (modelled)", r.label, r.tokens_per_s));
    g += text_at(S(r.tokens_per_s) + 4, y + 20, fmt::format("{:.0f}", r.tokens_per_s), "start", " font-size=\"10\"");
    y += row_h;
  }
  if (rows.empty()) g += text_at(20, y + 14, "nothing the plan searched fits the budget");
  // The budget and the card across the peak panel.
  if (in.plan_budget_bytes > 0) {
    const double x = M(static_cast<double>(in.plan_budget_bytes));
    g += line(x, top - 4, x, y, kBandLines[0].colour, kBandLines[0].dash);
    g += text_at(x, y + 14, fmt::format("budget {}", gib(in.plan_budget_bytes)), "middle", " font-size=\"10\"");
  }
  if (cap > 0) {
    g += line(M(cap), top - 4, M(cap), y, "#000000", "", 2);
    g += text_at(M(cap), top - 22, fmt::format("capacity {}", gib(in.setup.device.capacity_bytes)), "middle", " font-size=\"10\"");
  }
  g += "</svg>\n";
  return g;
}

// ---- a calibration's probes: measured against estimated --------------------------------------------

std::string probes_svg(const Input& in) {
  const std::vector<ProbeRow>& rows = in.probes;
  const int row_h = 52;
  const int height = 70 + row_h * static_cast<int>(std::max<size_t>(1, rows.size())) + 40;
  std::string g = open_svg(height, fmt::format("{}: calibration probes, measured against estimated", in.title));
  g += text_at(20, 22, in.probes_note.empty() ? "each probe's device figure: measured, estimated, estimated by a fit without it" : in.probes_note,
               "start", " font-weight=\"bold\"");
  int64_t most = 1;
  for (const ProbeRow& r : rows) most = std::max({most, r.measured, r.estimated, r.held_out});
  const double x0 = 300, x1 = kWidth - 150;
  const auto X = [&](double b) { return x0 + (x1 - x0) * b / static_cast<double>(most); };
  const auto err = [](int64_t est, int64_t meas) {
    return meas > 0 ? fmt::format("{:+.1f}%", 100.0 * (static_cast<double>(est) - static_cast<double>(meas)) / static_cast<double>(meas)) : "";
  };
  double y = 44;
  for (const ProbeRow& r : rows) {
    std::string name = r.name;
    if (name.size() > 44) name = name.substr(0, 41) + "...";
    g += text_at(x0 - 8, y + 24, name, "end", " font-size=\"11\"");
    const struct {
      const char* what;
      int64_t bytes;
      const char* fill;
    } bars[] = {{"measured", r.measured, kTermColours[0]},
                {"estimated", r.estimated, kTermColours[static_cast<int>(Term::logits_and_loss)]},
                {"held out", r.held_out, kTermColours[static_cast<int>(Term::allocator_overhead)]}};
    double by = y + 4;
    for (const auto& b : bars) {
      if (b.bytes <= 0 && std::string(b.what) == "held out") {  // fewer than two probes: no fit without it
        g += text_at(x0 + 4, by + 11, "held out: none (no fit without this probe)", "start", " font-size=\"10\"");
        by += 15;
        continue;
      }
      g += rect(x0, by, X(static_cast<double>(b.bytes)) - x0, 13, b.fill, fmt::format("{} {}: {}", r.name, b.what, gib(b.bytes)));
      std::string text = fmt::format("{} {}", b.what, gib(b.bytes));
      if (b.bytes != r.measured) text += " (" + err(b.bytes, r.measured) + ")";
      g += text_at(X(static_cast<double>(b.bytes)) + 4, by + 11, text, "start", " font-size=\"10\"");
      by += 15;
    }
    y += row_h;
  }
  if (rows.empty()) g += text_at(20, y + 14, "no probe ran");
  g += text_at(20, y + 24, "bars: measured (dark), estimated without calibration (blue), estimated by the fit of the other probes (yellow)",
               "start", " font-size=\"11\"");
  g += "</svg>\n";
  return g;
}

// ---- a real run over time -------------------------------------------------------------------------

// Series styles that differ without colour: solid, dashed, dotted, and darker to lighter.
struct SeriesStyle {
  const char* colour;
  const char* dash;
};
constexpr SeriesStyle kSeriesStyles[] = {{"#1b3a5c", ""}, {"#c2571a", "8 4"}, {"#3f6e3a", "2 3"}, {"#5b4a8b", "12 4 2 4"},
                                         {"#8c2d04", "4 2"}, {"#3e8fb0", "1 2"}};
constexpr size_t kMaxPointsPerSeries = 4000;  // a long run is thinned to its per-bucket maxima

// At most kMaxPointsPerSeries points, each bucket's highest kept (a peak is never thinned away).
std::vector<RunTrace::Point> thinned(const std::vector<RunTrace::Point>& pts) {
  if (pts.size() <= kMaxPointsPerSeries) return pts;
  std::vector<RunTrace::Point> out;
  const size_t per = (pts.size() + kMaxPointsPerSeries - 1) / kMaxPointsPerSeries;
  for (size_t i = 0; i < pts.size(); i += per) {
    RunTrace::Point best = pts[i];
    for (size_t k = i; k < std::min(pts.size(), i + per); ++k)
      if (pts[k].bytes > best.bytes) best = pts[k];
    out.push_back(best);
  }
  return out;
}

}  // namespace

std::string run_svg(const RunTrace& r) {
  double t_end = 0;
  int64_t most = 0;
  for (const auto& s : r.series)
    for (const auto& p : s.points) {
      t_end = std::max(t_end, p.t);
      most = std::max(most, p.bytes);
    }
  for (const auto& e : r.events) t_end = std::max(t_end, e.t);
  for (const auto& l : r.estimate) most = std::max(most, l.bytes);
  if (t_end <= 0) t_end = 1;
  const double cap = static_cast<double>(r.capacity_bytes);
  const double top_gib = nice_top(std::max(gib_of(r.capacity_bytes), gib_of(most)) * 1.05);
  const double x0 = 70, x1 = kWidth - 170, y0 = 300, y1 = 50;
  const auto X = [&](double t) { return x0 + (x1 - x0) * (t / t_end); };  // t / t_end first: no overflow near 1e308
  const auto Y = [&](double bytes) { return y0 - (y0 - y1) * (bytes / kGiB) / top_gib; };
  const int legend_rows = static_cast<int>(r.series.size() + r.estimate.size());
  std::string g = open_svg(360 + 16 * legend_rows, fmt::format("{}: memory over time", r.title));
  g += gib_axis(x0, y0, x1, y1, top_gib);
  // Ticks at a nice step (nice_top of a fifth of the run) up to the end: at most a dozen, counted
  // by index so that no time (1e308, 1e-320) can keep the loop going.
  const double step = nice_top(t_end / 5.0);
  const int ticks = step > 0 && std::isfinite(step) ? static_cast<int>(std::min(12.0, std::floor(t_end / step * 1.0001))) : 0;
  for (int k = 0; k <= ticks; ++k) {
    const double t = k * step;
    g += line(X(t), y0, X(t), y0 + 4, "#000000", "", 1);
    g += text_at(X(t), y0 + 16, fmt::format("{:.4g}", t), "middle", " font-size=\"11\"");
  }
  g += text_at((x0 + x1) / 2, y0 + 34, "seconds", "middle", " font-weight=\"bold\"");
  // The bands and the capacity, labelled at the right.
  if (cap > 0) {
    g += line(x0, Y(cap), x1, Y(cap), "#000000", "", 2.5);
    g += text_at(x1 + 6, Y(cap) + 4, fmt::format("capacity {}", gib(r.capacity_bytes)), "start", " font-weight=\"bold\" font-size=\"11\"");
    // Labels from the emergency line down, at least a line apart however close the bands are.
    double label_y = Y(cap) + 4;
    for (size_t k = std::size(kBandLines); k-- > 0;) {
      const BandLine& b = kBandLines[k];
      const double y = Y((r.thresholds.*b.at) * cap);
      g += line(x0, y, x1, y, b.colour, b.dash, 1);
      label_y = std::max(y + 4, label_y + 12);
      g += text_at(x1 + 6, label_y, fmt::format("{} {}", pct(r.thresholds.*b.at), b.name), "start", " font-size=\"10\"");
    }
  }
  // The estimate's levels, grey and dash-dotted.
  for (const auto& l : r.estimate) {
    g += line(x0, Y(static_cast<double>(l.bytes)), x1, Y(static_cast<double>(l.bytes)), "#555555", "10 3 2 3", 1.2);
  }
  // The events: a vertical mark each, named at the top (alternating heights so neighbours do not collide).
  for (size_t i = 0; i < r.events.size(); ++i) {
    const auto& e = r.events[i];
    g += line(X(e.t), y1 - 6, X(e.t), y0, "#8b0000", "3 3", 1);
    g += text_at(X(e.t), y1 - 10 - 12.0 * static_cast<double>(i % 3), e.what, "middle", " font-size=\"10\" fill=\"#8b0000\"");
  }
  // The series.
  for (size_t i = 0; i < r.series.size(); ++i) {
    const SeriesStyle& st = kSeriesStyles[i % std::size(kSeriesStyles)];
    std::string pts;
    for (const auto& p : thinned(r.series[i].points)) pts += fmt::format("{:.1f},{:.1f} ", X(p.t), Y(static_cast<double>(p.bytes)));
    if (!pts.empty())
      g += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}><title>{}</title></polyline>\n", pts,
                       st.colour, *st.dash ? fmt::format(" stroke-dasharray=\"{}\"", st.dash) : "", esc(r.series[i].name));
  }
  // The legend: each series and estimate level with its style and its highest value.
  double ly = y0 + 58;
  for (size_t i = 0; i < r.series.size(); ++i) {
    const SeriesStyle& st = kSeriesStyles[i % std::size(kSeriesStyles)];
    int64_t peak = 0;
    for (const auto& p : r.series[i].points) peak = std::max(peak, p.bytes);
    g += line(20, ly - 4, 60, ly - 4, st.colour, st.dash, 2);
    g += text_at(68, ly, fmt::format("{}: peak {}", r.series[i].name, gib(peak)), "start", " font-size=\"11\"");
    ly += 16;
  }
  for (const auto& l : r.estimate) {
    g += line(20, ly - 4, 60, ly - 4, "#555555", "10 3 2 3", 1.2);
    g += text_at(68, ly, fmt::format("{}: {}", l.name, gib(l.bytes)), "start", " font-size=\"11\"");
    ly += 16;
  }
  g += "</svg>\n";
  return g;
}

std::string run_html(const RunTrace& r) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += fmt::format("<title>memplan run: {}</title>\n", esc(r.title));
  h += std::string("<style>\n") + kStyle + "</style>\n</head>\n<body>\n";
  h += fmt::format("<h1>memplan run: {}</h1>\n", esc(r.title));
  for (const std::string& l : r.lines) h += fmt::format("<p class=\"meta\">{}</p>\n", esc(l));
  h += "<h2 id=\"run\">Memory over time</h2>\n<figure>\n" + run_svg(r);
  h += "<figcaption>What was measured (per GPU, or the process tree; the monitor's per-step peaks) against the card's "
       "capacity, the bands and the estimate with the same setup; the red marks are the events.</figcaption>\n</figure>\n";
  h += "<h2 id=\"events\">Events</h2>\n";
  if (r.events.empty()) {
    h += "<p>none</p>\n";
  } else {
    h += "<table>\n<tr><th>seconds</th><th>event</th><th>detail</th></tr>\n";
    for (const auto& e : r.events)
      h += fmt::format("<tr><td class=\"n\">{:.2f}</td><td>{}</td><td>{}</td></tr>\n", e.t, esc(e.what), esc(e.detail));
    h += "</table>\n";
  }
  h += fmt::format("<p class=\"meta\">memplan {}.</p>\n</body>\n</html>\n", esc(r.version));
  return h;
}

const char* to_string(Chart c) {
  switch (c) {
    case Chart::breakdown: return "breakdown";
    case Chart::phases: return "phases";
    case Chart::micro_batch: return "micro-batch";
    case Chart::seq_len: return "seq-len";
    case Chart::layers: return "layers";
    case Chart::plan: return "plan";
    case Chart::probes: return "probes";
    case Chart::count: break;
  }
  return "?";
}

std::optional<Chart> parse_chart(const std::string& name) {
  for (int i = 0; i < static_cast<int>(Chart::count); ++i)
    if (name == to_string(static_cast<Chart>(i))) return static_cast<Chart>(i);
  return std::nullopt;
}

std::vector<std::string> chart_names() {
  std::vector<std::string> v;
  for (int i = 0; i < static_cast<int>(Chart::count); ++i) v.emplace_back(to_string(static_cast<Chart>(i)));
  return v;
}

std::vector<SweepPoint> sweep(const Input& in, Chart which) {
  const bool mb = which == Chart::micro_batch;
  std::vector<SweepPoint> out;
  const double cap = capacity_of(in.setup);
  const int64_t given = mb ? in.setup.batch.micro_batch : in.setup.batch.seq_len;
  const int64_t first = mb ? 1 : 128;
  // Doubling from the first point, through the given value, until two points past the card (or,
  // with no capacity, four times the given value); at most 16 points.
  int64_t past = 0;
  for (int64_t v = first; out.size() < 16; v *= 2) {
    TrainingSetup t = in.setup;
    (mb ? t.batch.micro_batch : t.batch.seq_len) = v;
    if (!validate(t).empty()) break;
    MemoryBreakdown e;
    try {
      e = estimate(t, in.calibration);
    } catch (const InputError&) {
      break;  // past what 64-bit byte counts hold: the sweep ends before it
    }
    SweepPoint p{v, e.verdict_bytes(), false};
    p.fits = cap > 0 && judge(e, t).fits;
    out.push_back(p);
    if (cap > 0 ? static_cast<double>(p.bytes) > cap : v >= 4 * given) ++past;
    if (past >= 2 || (cap > 0 && past >= 1 && v >= given)) break;
    if (v > (int64_t{1} << 40)) break;
  }
  return out;
}

std::string svg(const Input& in, Chart c) {
  switch (c) {
    case Chart::breakdown: return breakdown_svg(in);
    case Chart::phases: return phases_svg(in);
    case Chart::micro_batch:
    case Chart::seq_len: return sweep_svg(in, c);
    case Chart::layers: return layers_svg(in);
    case Chart::plan: return plan_svg(in);
    case Chart::probes: return probes_svg(in);
    case Chart::count: break;
  }
  return "";
}

std::string html(const Input& in) {
  const MemoryBreakdown& e = in.estimate;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += fmt::format("<title>memplan report: {}</title>\n", esc(in.title));
  h += std::string("<style>\n") + kStyle + "</style>\n</head>\n<body>\n";
  h += fmt::format("<h1>memplan report: {}</h1>\n", esc(in.title));
  for (const std::string& l : in.lines) h += fmt::format("<p class=\"meta\">{}</p>\n", esc(l));
  const struct {
    Chart chart;
    const char* heading;
    const char* caption;
  } parts[] = {
      {Chart::breakdown, "The peak against the card",
       "Each term at the step's peak, stacked; the lines are the bands (target, warning, critical, emergency) and the "
       "card's capacity. Under the bar: allocated (tensors), reserved (the allocator's segments) and device (reserved plus "
       "the CUDA context) apart."},
      {Chart::phases, "The step's phases", "The peak of the forward, the backward and the optimizer step, each stacked by term, "
                                           "with the term that is largest at that moment and the op where it peaks."},
      {Chart::micro_batch, "Peak against micro-batch", "The same setup at other micro-batches; the circled point is the largest that "
                                                        "fits the target."},
      {Chart::seq_len, "Peak against sequence length", "The same setup at other sequence lengths; the circled point is the largest "
                                                         "that fits the target."},
      {Chart::layers, "What autograd saves per layer", "The tensors saved for backward by one layer of each kind, in the order "
                                                       "memplan explain lists them (a kind with many, such as a MoE layer's "
                                                       "experts, shows its largest and the rest as one row)."},
  };
  if (!in.probes.empty()) {
    h += "<h2 id=\"probes\">The calibration's probes</h2>\n<figure>\n" + svg(in, Chart::probes);
    h += "<figcaption>Each probe of the calibration run: the device figure it measured (peak reserved plus what lives outside "
         "the allocator), the estimate without calibration, and the estimate of a fit made on the other probes (leave-one-out: "
         "what the calibration will do for a setup it has not seen).</figcaption>\n</figure>\n";
  }
  if (!in.plan_note.empty()) {  // --plan: its section, with "nothing fits" when nothing does
    h += "<h2 id=\"plan\">The plan's candidates</h2>\n<figure>\n" + svg(in, Chart::plan);
    h += "<figcaption>The fastest configuration of each kind that fits the plan's budget (memplan plan's search with the "
         "same flags), its peak against the budget and the card, and its modelled throughput; the pick in bold and dark.</figcaption>\n"
         "</figure>\n";
  }
  for (const auto& p : parts) {
    h += fmt::format("<h2 id=\"{}\">{}</h2>\n<figure>\n", to_string(p.chart), p.heading);
    h += svg(in, p.chart);
    h += fmt::format("<figcaption>{}</figcaption>\n</figure>\n", p.caption);
  }
  // The terms at the peak as a table, for reading off exact numbers.
  const PhaseState& pk = e.peak();
  h += "<h2 id=\"terms\">Terms at the peak</h2>\n<table>\n<tr><th>term</th><th>bytes</th><th>GiB</th><th>share</th></tr>\n";
  for (int i = 0; i < kNumTerms; ++i) {
    if (pk.bytes[i] == 0) continue;
    h += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1f}%</td></tr>\n",
                     term_name(term_at(i)), text::thousands(pk.bytes[i]), gib(pk.bytes[i]),
                     100.0 * static_cast<double>(pk.bytes[i]) / static_cast<double>(std::max<int64_t>(1, pk.total())));
  }
  h += fmt::format("<tr><th>peak ({})</th><th class=\"n\">{}</th><th class=\"n\">{}</th><th></th></tr>\n</table>\n",
                   phase_name(pk.phase), text::thousands(pk.total()), gib(pk.total()));
  if (!e.notes.empty()) {
    h += "<h2 id=\"notes\">Notes</h2>\n<ul>\n";
    for (const std::string& n : e.notes) h += fmt::format("<li>{}</li>\n", esc(n));
    h += "</ul>\n";
  }
  h += fmt::format("<p class=\"meta\">memplan {}; modelled, not measured{}.</p>\n</body>\n</html>\n", esc(in.version),
                   e.calibrated ? fmt::format(" (calibrated with {})", esc(e.calibration)) : "");
  return h;
}

}  // namespace memplan::report
