// memplan report: the HTML file and the --svg charts from real setups (the bundled examples), read
// back: well-formed markup, every chart with its labels, nothing fetched, text escaped, the sweeps
// consistent with the estimator, and the errors of a command that writes a file.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/probes.h"
#include "estimator/text.h"
#include "estimator/estimate.h"
#include "profiles/profiles.h"
#include "report/report.h"

namespace fs = std::filesystem;
using namespace memplan;

namespace {

const std::string kExamples = std::string(MEMPLAN_TEST_DATA) + "/../../examples";

struct Run {
  int code = -1;
  std::string out, err;
};

Run memplan_run(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"memplan"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Run r;
  r.code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_dir() {
  const fs::path d = fs::temp_directory_path() / fmt::format("memplan-report-{}", ::getpid());
  fs::create_directories(d);
  return d.string();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every element closed in order (the report's markup has no comments, CDATA or scripts): returns
// "" when balanced, else what is wrong. <!DOCTYPE> and the HTML void element <meta> stand alone.
std::string unbalanced(const std::string& text) {
  std::vector<std::string> open;
  for (size_t at = text.find('<'); at != std::string::npos; at = text.find('<', at + 1)) {
    const size_t end = text.find('>', at);
    if (end == std::string::npos) return "a tag never closed";
    const std::string tag = text.substr(at + 1, end - at - 1);
    if (tag.empty()) return "an empty tag";
    if (tag[0] == '!') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">");
      open.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;
    const std::string name = tag.substr(0, tag.find_first_of(" \n\t"));
    if (name == "meta") continue;
    open.push_back(name);
  }
  return open.empty() ? "" : "<" + open.back() + "> left open";
}

}  // namespace

TEST_CASE("memplan report: the quickstart as one self-contained HTML file with every chart") {
  const std::string dir = temp_dir();
  const std::string out = dir + "/quickstart.html";
  fs::remove(out);
  const Run r = memplan_run({"report", "--config", kExamples + "/quickstart.yaml", "--out", out});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("wrote " + out + " (HTML report, ", 0) == 0);
  const std::string h = slurp(out);
  CHECK(h.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0) == 0);
  CHECK(unbalanced(h) == "");
  CHECK(count(h, "<svg xmlns=\"http://www.w3.org/2000/svg\"") == 5);
  for (const char* id : {"breakdown", "phases", "micro-batch", "seq-len", "layers", "terms"})
    CHECK(h.find(fmt::format("<h2 id=\"{}\">", id)) != std::string::npos);
  // The labels people read: the card, the bands, the phases, the three device figures, the sweeps.
  for (const char* label : {"capacity 11.72 GiB (rtx-3060-12gb)", "90% target", "92% warning", "95% critical", "97% emergency",
                            "allocated ", "reserved ", "device ", ">forward<", ">backward<", ">optimizer_step<", "largest that fits: ",
                            ">micro-batch<", ">sequence length<", "saved for backward", ">weights<", ">optimizer_states<",
                            "verdict: ", "fits the target"})
    CHECK_MESSAGE(h.find(label) != std::string::npos, label);
  // Nothing fetched: no script, no link, no source other than the SVG namespace's name.
  CHECK(h.find("<script") == std::string::npos);
  CHECK(h.find("href=") == std::string::npos);
  CHECK(h.find("src=") == std::string::npos);
  CHECK(count(h, "http") == count(h, "http://www.w3.org/2000/svg"));
  // The terms table holds the estimate's own numbers.
  CHECK(h.find("<th>peak (optimizer_step)</th>") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("memplan report --svg: each chart alone, as a standalone SVG") {
  const std::string dir = temp_dir();
  for (const std::string& c : report::chart_names()) {
    CAPTURE(c);
    const std::string out = dir + "/" + c + ".svg";
    std::vector<std::string> args = {"report", "--config", kExamples + "/quickstart.yaml", "--svg", c, "--out", out, "--force"};
    if (c == "plan") args.push_back("--plan");
    if (c == "probes") args.insert(args.end(), {"--probes", std::string(MEMPLAN_TEST_DATA) + "/calibrate/h200-1a12cc5.json"});
    const Run r = memplan_run(args);
    REQUIRE(r.code == 0);
    const std::string s = slurp(out);
    CHECK(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(s.find("<title>") != std::string::npos);
    CHECK(unbalanced(s) == "");
    CHECK(count(s, "<svg") == 1);
  }
  fs::remove_all(dir);
}

TEST_CASE("memplan report: names from files are escaped; a setup without a card says so") {
  const std::string dir = temp_dir();
  const std::string config = dir + "/a&b<c>.yaml";
  fs::copy_file(kExamples + "/quickstart.yaml", config, fs::copy_options::overwrite_existing);
  const std::string out = dir + "/r.html";
  Run r = memplan_run({"report", "--config", config, "--out", out, "--force"});
  REQUIRE(r.code == 0);
  std::string h = slurp(out);
  CHECK(h.find("a&amp;b&lt;c&gt;.yaml") != std::string::npos);
  CHECK(h.find("a&b<c>") == std::string::npos);
  CHECK(unbalanced(h) == "");
  r = memplan_run({"report", "--model", "gpt2", "--seq-len", "256", "--out", out, "--force"});
  REQUIRE(r.code == 0);
  h = slurp(out);
  CHECK(h.find("capacity unknown: pass --gpu or --gpu-memory") != std::string::npos);
  CHECK(h.find("largest that fits: ") == std::string::npos);
  CHECK(unbalanced(h) == "");
  fs::remove_all(dir);
}

TEST_CASE("memplan report: a setup estimate takes whose sweep would overflow 64-bit bytes still reports") {
  const std::string dir = temp_dir();
  Run r = memplan_run({"estimate", "--model", "llama-3-8b", "--seq-len", "20000000"});
  REQUIRE(r.code == 0);
  r = memplan_run({"report", "--model", "llama-3-8b", "--seq-len", "20000000", "--out", dir + "/s.html"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(unbalanced(slurp(dir + "/s.html")) == "");
  fs::remove_all(dir);
}

TEST_CASE("memplan report: the sweeps are the estimator's numbers, doubling past the card") {
  const profiles::SetupInputs in = [] {
    profiles::SetupInputs i;
    i.config = kExamples + "/quickstart.yaml";
    return i;
  }();
  const profiles::BuiltSetup b = profiles::build_setup(in);
  report::Input r;
  r.setup = b.setup;
  r.estimate = estimate(b.setup);
  for (const report::Chart c : {report::Chart::micro_batch, report::Chart::seq_len}) {
    const std::string chart = report::to_string(c);
    CAPTURE(chart);
    const auto pts = report::sweep(r, c);
    REQUIRE(pts.size() >= 2);
    for (size_t i = 0; i < pts.size(); ++i) {
      TrainingSetup t = b.setup;
      (c == report::Chart::micro_batch ? t.batch.micro_batch : t.batch.seq_len) = pts[i].value;
      const MemoryBreakdown e = estimate(t);
      CHECK(pts[i].bytes == e.verdict_bytes());
      CHECK(pts[i].fits == judge(e, t).fits);
      // (Not always monotone in bytes: what the allocator replay needs can dip by a few MiB where
      // a larger batch rounds into the segments better.)
      if (i > 0) CHECK(pts[i].value == 2 * pts[i - 1].value);
    }
    // The last point is past the card: the chart shows where it stops fitting.
    CHECK(pts.back().bytes > b.setup.device.capacity_bytes);
  }
}

TEST_CASE("memplan report: the errors of a command that writes a file") {
  const std::string dir = temp_dir();
  const std::string config = kExamples + "/quickstart.yaml";
  Run r = memplan_run({"report", "--config", config});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: --out: memplan report writes a file: --out is missing", 0) == 0);
  r = memplan_run({"report", "--config", config, "--svg", "pie", "--out", dir + "/x.svg"});
  CHECK(r.code == 2);
  CHECK(r.err.find("unknown chart 'pie'") != std::string::npos);
  CHECK(r.err.find("expected one of: breakdown, phases, micro-batch, seq-len, layers, plan, probes") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/x.svg"));
  const std::string existing = dir + "/existing.html";
  std::ofstream(existing) << "mine\n";
  r = memplan_run({"report", "--config", config, "--out", existing});
  CHECK(r.code == 2);
  CHECK(slurp(existing) == "mine\n");
  // Never the config it reads, --force or not.
  const std::string copy = dir + "/train.yaml";
  fs::copy_file(config, copy, fs::copy_options::overwrite_existing);
  r = memplan_run({"report", "--config", copy, "--out", copy, "--force"});
  CHECK(r.code == 2);
  CHECK(slurp(copy) == slurp(config));
  fs::remove_all(dir);
}

TEST_CASE("memplan report --monitor-log: a real H200 run against its estimate, and a monitor's events") {
  const std::string dir = temp_dir();
  const std::string log = std::string(MEMPLAN_TEST_DATA) + "/gpu/h200-knobs/watch-qwen05.jsonl";
  const std::string out = dir + "/run.html";
  Run r = memplan_run({"report", "--monitor-log", log, "--out", out, "--force"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::string h = slurp(out);
  CHECK(unbalanced(h) == "");
  for (const char* label : {"GPU0 NVIDIA H200: peak 23.33 GiB", "capacity 139.80 GiB", ">exit 0<", "estimate (peak): 25.60 GiB",
                            "90% target", "97% emergency", ">seconds<", "measured by nvml"})
    CHECK_MESSAGE(h.find(label) != std::string::npos, label);
  // With the setup flags the run was estimated with (bf16, as the model loaded): the phases drawn.
  r = memplan_run({"report", "--monitor-log", log, "--model", "qwen2.5-0.5b", "--micro-batch", "8", "--seq-len", "1024", "--grad-accum", "2",
                   "--precision", "bf16", "--checkpointing", "full", "--gpu", "h200", "--transformers-version", "5.17", "--torch-version",
                   "2.11", "--svg", "run", "--out", dir + "/run.svg"});
  REQUIRE(r.code == 0);
  const std::string s = slurp(dir + "/run.svg");
  CHECK(s.rfind("<svg xmlns=", 0) == 0);
  CHECK(s.find("estimate: backward (peak): 23.25 GiB") != std::string::npos);
  CHECK(s.find("estimate: forward: ") != std::string::npos);

  // A Python monitor's log: per-step peaks, a band change, a leak, a departure and a recommendation.
  const std::string mlog = dir + "/monitor.jsonl";
  std::ofstream(mlog)
      << R"({"schema":"memplan.monitor/v1","kind":"start","source":"monitor","device":"cuda:0","reader":"torch.cuda","thresholds":{"target":0.9,"warning":0.92,"critical":0.95,"emergency":0.97}})" "\n"
      << R"({"schema":"memplan.monitor/v1","kind":"step","t":1.0,"step":1,"peak_used_bytes":10737418240,"capacity_bytes":12884901888,"band":"normal","events":[]})" "\n"
      << R"({"schema":"memplan.monitor/v1","kind":"step","t":2.0,"step":2,"peak_used_bytes":12348030976,"capacity_bytes":12884901888,"band":"critical","events":["band:critical","recommendation"],"recommendation":{"flags":"--micro-batch 2 --grad-accum 4"}})" "\n"
      << R"({"schema":"memplan.monitor/v1","kind":"step","t":3.0,"step":3,"peak_used_bytes":12448030976,"capacity_bytes":12884901888,"band":"critical","events":["leak","departure"],"leak":{"rate_bytes_per_step":104857600,"since_step":1},"departure":{"error":0.12,"term":"activations"}})" "\n"
      << R"({"schema":"memplan.monitor/v1","kind":"end","t":3.5,"steps":3,"peak_bytes":12448030976,"worst_band":"critical"})" "\n";
  r = memplan_run({"report", "--monitor-log", mlog, "--out", dir + "/monitor.html"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  h = slurp(dir + "/monitor.html");
  CHECK(unbalanced(h) == "");
  for (const char* label : {"memplan run: monitor on cuda:0", "step peaks (monitor): peak 11.59 GiB", ">band:critical<", ">leak<",
                            ">departure<", ">recommendation<", "memplan fit: --micro-batch 2 --grad-accum 4", "+12.0% against the estimate (likely activations)",
                            "+100.0 MiB/step since step 1", "3 steps, worst band critical", "capacity 12.00 GiB"})
    CHECK_MESSAGE(h.find(label) != std::string::npos, label);

  // The start record's thresholds, target included: a reading over a 0.5 target is above_target.
  const std::string tlog = dir + "/target.jsonl";
  std::ofstream(tlog)
      << R"({"schema":"memplan.monitor/v1","kind":"start","source":"watch","command":["t"],"sampler":"process","thresholds":{"target":0.5,"warning":0.92,"critical":0.95,"emergency":0.97}})" "\n"
      << R"({"schema":"memplan.monitor/v1","kind":"sample","t":1,"devices":[{"index":0,"name":"process tree","used_bytes":7000,"total_bytes":10000}]})" "\n";
  r = memplan_run({"report", "--monitor-log", tlog, "--out", dir + "/target.html"});
  REQUIRE(r.code == 0);
  h = slurp(dir + "/target.html");
  CHECK(h.find(">band:above_target<") != std::string::npos);
  CHECK(h.find(">50% target<") != std::string::npos);
  // Times at double's ends: the chart is drawn, finite, and the command ends.
  for (const char* t : {"1.7976e308", "2e-323", "0"}) {
    CAPTURE(t);
    const std::string edge = dir + "/edge.jsonl";
    std::ofstream(edge) << R"({"schema":"memplan.monitor/v1","kind":"start","source":"watch","command":["t"]})" "\n"
                        << R"({"schema":"memplan.monitor/v1","kind":"sample","t":)" << t
                        << R"(,"devices":[{"index":0,"name":"GPU","used_bytes":5,"total_bytes":10}]})" "\n";
    r = memplan_run({"report", "--monitor-log", edge, "--svg", "run", "--out", dir + "/edge.svg", "--force"});
    REQUIRE(r.code == 0);
    const std::string e = slurp(dir + "/edge.svg");
    CHECK(unbalanced(e) == "");
    CHECK(e.find("inf") == std::string::npos);
    CHECK(e.find("nan") == std::string::npos);
  }

  // Errors: the estimate's flags with a log, another chart with a log, a log that is not there, --out over the log.
  r = memplan_run({"report", "--monitor-log", mlog, "--probes", dir + "/none.json", "--out", dir + "/x.html"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: --probes: --probes belongs to the estimate's report, not to a run's (--monitor-log)", 0) == 0);
  r = memplan_run({"report", "--config", kExamples + "/quickstart.yaml", "--svg", "run", "--out", dir + "/x.svg"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: --svg: the run chart is a monitor log's\nhint: add --monitor-log FILE", 0) == 0);
  r = memplan_run({"report", "--monitor-log", mlog, "--svg", "breakdown", "--out", dir + "/x.svg"});
  CHECK(r.code == 2);
  CHECK(r.err.find("with --monitor-log the one chart is 'run'") != std::string::npos);
  r = memplan_run({"report", "--monitor-log", dir + "/missing.jsonl", "--out", dir + "/x.html"});
  CHECK(r.code == 2);
  CHECK(r.err.find("cannot read the log") != std::string::npos);
  const std::string before = slurp(mlog);
  r = memplan_run({"report", "--monitor-log", mlog, "--out", mlog, "--force"});
  CHECK(r.code == 2);
  CHECK(slurp(mlog) == before);
  fs::remove_all(dir);
}

TEST_CASE("memplan report --plan: the plan's candidates beside the estimate, the pick the one memplan plan prints") {
  const std::string dir = temp_dir();
  const std::string config = kExamples + "/quickstart.yaml";
  Run r = memplan_run({"report", "--config", config, "--plan", "--out", dir + "/plan.html"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string h = slurp(dir + "/plan.html");
  CHECK(unbalanced(h) == "");
  CHECK(count(h, "<svg xmlns=\"http://www.w3.org/2000/svg\"") == 6);
  for (const char* label : {"<h2 id=\"plan\">", "(the pick)", "modelled tokens/s", "peak (GiB)", "budget 10.55 GiB", "candidates, "})
    CHECK_MESSAGE(h.find(label) != std::string::npos, label);
  // The pick is plan's best with the same flags.
  const Run p = memplan_run({"plan", "--config", config, "--json"});
  REQUIRE(p.code == 0);
  const auto doc = nlohmann::json::parse(p.out);
  const std::string pick = fmt::format("1. micro-batch {} x {} accumulation (the pick)", doc["best"]["micro_batch"].get<int64_t>(),
                                       doc["best"]["grad_accum"].get<int64_t>());
  const size_t at = h.find(pick);
  REQUIRE_MESSAGE(at != std::string::npos, pick);
  // The pick's own row (up to the next row's number) holds its peak and its modelled speed.
  const std::string row = h.substr(at, h.find(">2. ", at) - at);
  CHECK(row.find(">" + text::gib(doc["best"]["peak_bytes"].get<int64_t>()) + "</text>") != std::string::npos);
  CHECK(row.find(fmt::format(">{:.0f}</text>", doc["best"]["modelled_tokens_per_s"].get<double>())) != std::string::npos);
  // The chart alone, and what it needs.
  r = memplan_run({"report", "--config", config, "--plan", "--svg", "plan", "--out", dir + "/plan.svg"});
  CHECK(r.code == 0);
  CHECK(unbalanced(slurp(dir + "/plan.svg")) == "");
  r = memplan_run({"report", "--config", config, "--svg", "plan", "--out", dir + "/x.svg"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: --svg: the plan chart needs --plan", 0) == 0);
  r = memplan_run({"report", "--config", config, "--global-batch", "64", "--out", dir + "/x.html"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: --global-batch: --global-batch is the plan's: it needs --plan", 0) == 0);
  fs::remove_all(dir);
}

TEST_CASE("memplan report --probes: a calibration run's probes, measured against estimated and held out") {
  const std::string dir = temp_dir();
  const std::string config = kExamples + "/quickstart.yaml";
  const std::string probes = std::string(MEMPLAN_TEST_DATA) + "/calibrate/h200-1a12cc5.json";
  Run r = memplan_run({"report", "--config", config, "--probes", probes, "--out", dir + "/p.html"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string h = slurp(dir + "/p.html");
  CHECK(unbalanced(h) == "");
  CHECK(count(h, "<svg xmlns=\"http://www.w3.org/2000/svg\"") == 6);
  CHECK(h.find("<h2 id=\"probes\">") != std::string::npos);
  CHECK(h.find("7 probes on NVIDIA H200: fit ") != std::string::npos);
  // Each probe's bars are the fit's own numbers (calibrate --from's).
  const calibrate::FitReport fit = cli::fit_saved(profiles::load_saved_calibration(probes));
  REQUIRE(fit.probes.size() == 7);
  for (const calibrate::ProbeReport& p : fit.probes) {
    CAPTURE(p.name);
    CHECK(h.find(">" + p.name + "<") != std::string::npos);
    CHECK(h.find("measured " + text::gib(p.measured.device) + "<") != std::string::npos);
    CHECK(h.find("estimated " + text::gib(p.uncalibrated.device) + " (") != std::string::npos);
    REQUIRE(p.held_out > 0);
    CHECK(h.find("held out " + text::gib(p.held_out) + " (") != std::string::npos);
  }
  // One probe: no fit can leave it out, and the chart says so instead of drawing 0 B.
  const std::string one = dir + "/one.json";
  std::ofstream(one) << "{\"schema\": \"memplan.calibrate/v1\", \"stamp\": {\"device_name\": \"NVIDIA H200\", \"libtorch\": \"2.11\"},\n"
                        " \"cuda\": true, \"probes\": [{\"name\": \"" << fit.probes.front().name << "\", \"ok\": true, \"measured_bytes\": "
                     << fit.probes.front().measured.device << "}]}\n";
  r = memplan_run({"report", "--config", config, "--probes", one, "--svg", "probes", "--out", dir + "/one.svg"});
  REQUIRE(r.code == 0);
  const std::string o = slurp(dir + "/one.svg");
  CHECK(o.find("held out: none (no fit without this probe)") != std::string::npos);
  CHECK(o.find("held out 0 B") == std::string::npos);
  r = memplan_run({"report", "--config", config, "--svg", "probes", "--out", dir + "/x.svg"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: --svg: the probes chart needs --probes FILE", 0) == 0);
  // A broken measurements file: at its line, nothing written.
  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << "{\"schema\": \"memplan.calibrate/v1\", \"stamp\": {\"device_name\": \"x\", \"libtorch\": \"2.6\"}, \"cuda\": true,\n"
                        " \"probes\": [{\"name\": \"no such probe\", \"ok\": true, \"measured_bytes\": 5}]}\n";
  r = memplan_run({"report", "--config", config, "--probes", bad, "--out", dir + "/bad.html"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind(bad + ":2:", 0) == 0);
  CHECK_FALSE(fs::exists(dir + "/bad.html"));
  fs::remove_all(dir);
}

// A day-long monitor log (10 samples a second: 864,000 lines, about 200 MB) is read a line at a
// time and folded into a bounded trace (issue 55: it took about 1 GB). Measured in forked children,
// one run against the other: the report of a log ten times as long needs no more than 30 MB more
// (under 170 bytes per extra line, less than one record's own text; holding the records took about
// 600), the one spike of each log is its peak in the report, and the long series says it was
// thinned.
TEST_CASE("report --monitor-log: a long log is read a line at a time, thinned, its peak kept") {
  const std::string dir = temp_dir();
  auto write_log = [&](const std::string& path, int samples, int spike_at) {
    std::ofstream out(path);
    out << R"({"schema":"memplan.monitor/v1","kind":"start","source":"watch","command":["train"],"sampler":"nvml"})" "\n";
    for (int i = 0; i < samples; ++i) {
      const int64_t used = i == spike_at ? int64_t{9} << 30 : (int64_t{4} << 30) + (i % 1000) * 4096;
      out << fmt::format(R"({{"schema":"memplan.monitor/v1","kind":"sample","t":{:.1f},"devices":[{{"index":0,"name":"NVIDIA H200","used_bytes":{},"total_bytes":{}}}]}})",
                         0.1 * i, used, int64_t{140} << 30)
          << "\n";
    }
    out << R"({"schema":"memplan.monitor/v1","kind":"end","t":1.0,"exit_code":0,"peak_bytes":9663676416,"capacity_bytes":150323855360})" "\n";
  };
  struct Measured {
    int code = -1;
    long max_rss_kib = 0;
  };
  auto report_in_child = [&](const std::string& log, const std::string& out) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const Run r = memplan_run({"report", "--monitor-log", log, "--out", out, "--force"});
      ::_exit(r.code);
    }
    int status = 0;
    struct rusage ru {};
    REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
    return Measured{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ru.ru_maxrss};
  };
  write_log(dir + "/short.jsonl", 20'000, 12'345);
  write_log(dir + "/long.jsonl", 200'000, 123'457);
  const Measured s = report_in_child(dir + "/short.jsonl", dir + "/short.html");
  const Measured l = report_in_child(dir + "/long.jsonl", dir + "/long.html");
  REQUIRE(s.code == 0);
  REQUIRE(l.code == 0);
  MESSAGE("max RSS: " << s.max_rss_kib << " KiB for 20,000 samples, " << l.max_rss_kib << " KiB for 200,000");
  CHECK(l.max_rss_kib - s.max_rss_kib < 30 * 1024);
  for (const char* name : {"short", "long"}) {
    CAPTURE(name);
    const std::string h = slurp(dir + "/" + std::string(name) + ".html");
    CHECK(unbalanced(h) == "");
    CHECK(h.find("GPU0 NVIDIA H200: peak 9.00 GiB") != std::string::npos);
  }
  // 20,000 samples: every 4th kept as the highest of four; 200,000: of 32 (each series under 8,192 points).
  CHECK(slurp(dir + "/short.html").find("each point the highest of 4 samples") != std::string::npos);
  CHECK(slurp(dir + "/long.html").find("each point the highest of 32 samples") != std::string::npos);
}
