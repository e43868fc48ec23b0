// The forward/backward walk of a Segment (see graph.h for the rules it follows).
//
// Gradients are storages with reference counts, like tensors: AddBackward hands the same
// gradient to both inputs; a view's backward reuses its output's gradient; a second
// contribution is added in place when the buffer is not shared, else out of place
// (torch/csrc/autograd/input_buffer.cpp, InputBuffer::accumulate).
#include "estimator/graph.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdio>
#include <cstdlib>

#include "estimator/error.h"

namespace memplan::sim {

int64_t total(const CatBytes& c) {
  int64_t t = 0;
  for (int64_t v : c) t += v;
  return t;
}

int Segment::input(int64_t bytes, Cat cat) {
  MEMPLAN_CHECK(input_ < 0 && tensors_.empty(), "a segment has one input, declared first");
  tensors_.push_back({bytes, 0, cat});
  producer_.push_back(-1);
  input_ = 0;
  return 0;
}

int Segment::op(Op o) {
  const int id = static_cast<int>(tensors_.size());
  for (int r : o.reads) MEMPLAN_CHECK(r >= 0 && r < id, std::string("bad read in ") + o.name);
  for (int r : o.grad_to)
    MEMPLAN_CHECK(std::find(o.reads.begin(), o.reads.end(), r) != o.reads.end() || r == o.alias_of,
                  std::string("gradient to a tensor the op does not read in ") + o.name);
  int storage = id;
  int64_t bytes = o.out_bytes;
  if (o.alias_of >= 0) {
    MEMPLAN_CHECK(o.alias_of < id, "alias of an unknown tensor");
    storage = tensors_[o.alias_of].storage;
    bytes = o.view_bytes > 0 ? o.view_bytes : tensors_[o.alias_of].bytes;
    if (std::find(o.reads.begin(), o.reads.end(), o.alias_of) == o.reads.end()) o.reads.push_back(o.alias_of);
  }
  tensors_.push_back({bytes, storage, o.out_cat});
  producer_.push_back(static_cast<int>(ops_.size()));
  ops_.push_back(std::move(o));
  return id;
}

void Segment::hold(int t) {
  MEMPLAN_CHECK(t >= 0 && t < static_cast<int>(tensors_.size()) && !ops_.empty(), "hold of an unknown tensor");
  holds_.push_back({t, static_cast<int>(ops_.size()) - 1});
}

void Segment::mark_recompute(int t) {
  MEMPLAN_CHECK(t >= 0 && t < static_cast<int>(tensors_.size()) && producer_[t] >= 0, "no op produced this tensor");
  ops_[producer_[t]].recompute = true;
}

namespace {
constexpr int kForever = 1 << 30;
// SimRecord keys: storages are their ids; the other kinds are offset into their own ranges.
constexpr int64_t kGradKey = int64_t{1} << 40;
constexpr int64_t kAuxKey = int64_t{2} << 40;
constexpr int64_t kScratchKey = int64_t{3} << 40;
constexpr int64_t kParamGradKey = int64_t{4} << 40;
}

class Runner {
 public:
  Runner(const Segment& s, const SimOptions& opt) : s_(s), opt_(opt), rec_(opt.record) {
    if (rec_) {
      *rec_ = SimRecord{};
      cur_ = &rec_->forward;
    }
    const size_t n = s.tensors_.size();
    const size_t m = s.ops_.size();
    alive_.assign(n, false);
    refs_.assign(n, 0);
    last_use_.assign(n, -1);
    rg_.assign(n, false);
    grad_of_.assign(n, -1);
    aux_live_.assign(m, 0);
    saved_by_op_.assign(m, false);
    sac_kept_.assign(n, false);
    if (s.input_ >= 0) rg_[0] = opt.input_requires_grad;
    for (size_t t = 0; t < n; ++t) {
      if (s.producer_[t] < 0) continue;
      const Op& o = s.ops_[s.producer_[t]];
      bool rg = (o.param_grad_bytes > 0 || o.tied_params) && o.params_trainable;
      for (int r : o.reads) rg = rg || rg_[r];
      rg_[t] = rg;
    }
    for (size_t j = 0; j < m; ++j)
      for (int r : s.ops_[j].reads) last_use_[st(r)] = std::max<int>(last_use_[st(r)], static_cast<int>(j));
    for (const auto& [t, j] : s.holds_) last_use_[st(t)] = std::max(last_use_[st(t)], j);
    if (s.output_ >= 0) last_use_[st(s.output_)] = kForever;
    dies_after_.assign(m, {});
    for (size_t t = 0; t < n; ++t)
      if (last_use_[t] >= 0 && last_use_[t] < static_cast<int>(m)) dies_after_[last_use_[t]].push_back(static_cast<int>(t));
    // Selective recomputation keeps the region's inputs (what the checkpoint saves).
    for (size_t j = 0; j < m; ++j) {
      if (!s.ops_[j].recompute) continue;
      for (int r : s.ops_[j].reads) {
        const int p = s.producer_[r];
        if (p < 0 || !s.ops_[p].recompute) region_inputs_.push_back(st(r));
      }
    }
    std::sort(region_inputs_.begin(), region_inputs_.end());
    region_inputs_.erase(std::unique(region_inputs_.begin(), region_inputs_.end()), region_inputs_.end());
  }

  Profile run() {
    Profile p;
    const bool ckpt = opt_.checkpointed;
    if (rec_ && s_.input_ >= 0) rec_->input_key = 0;
    if (rec_ && s_.output_ >= 0) rec_->output_key = st(s_.output_);
    if (rec_)
      for (int t : s_.kept_) rec_->kept.push_back(st(t));
    if (s_.input_ >= 0) alloc(0);
    if (ckpt && s_.input_ >= 0) refs_[0] += 1;  // the checkpoint saves its input
    forward(/*grad_mode=*/!ckpt, /*only_recompute=*/false, p.forward);
    // Autocast's cache holds the half weight copies until the autocast region ends, whether or
    // not anything saved them (autocast_mode.cpp cached_cast ignores grad mode).
    for (size_t t = 0; t < alive_.size(); ++t)
      if (alive_[t] && s_.tensors_[t].cat == Cat::weight_copy && refs_[t] == 0) {
        p.forward_cache += s_.tensors_[t].bytes;
        if (rec_) rec_->autocast_frees.push_back(static_cast<int64_t>(t));
        divert_ = true;
        free_storage(static_cast<int>(t));
        divert_ = false;
      }
    for (size_t t = 0; t < alive_.size(); ++t)
      if (alive_[t] && !(s_.output_ >= 0 && st(s_.output_) == static_cast<int>(t)))
        p.retained[ci(s_.tensors_[t].cat)] += s_.tensors_[t].bytes;
    for (size_t j = 0; j < aux_live_.size(); ++j) p.retained[ci(Cat::activation)] += aux_live_[j];
    p.output_bytes = s_.output_ >= 0 ? s_.tensors_[s_.output_].bytes : 0;

    // Backward. The output belongs to the next segment now; its gradient arrives.
    if (rec_) cur_ = &rec_->backward;
    if (s_.output_ >= 0) {
      free_storage(st(s_.output_));
      if (rg_[s_.output_]) grad_of_[s_.output_] = new_grad(s_.tensors_[s_.output_].bytes);
      if (rec_ && rg_[s_.output_]) rec_->output_grad_key = kGradKey + grad_of_[s_.output_];
    }
    track(p.backward, "backward start");
    if (ckpt) forward(/*grad_mode=*/true, false, p.backward);  // recompute; the output is kept
    backward(p);
    if (ckpt) {
      if (s_.output_ >= 0) free_storage(st(s_.output_));
      if (s_.input_ >= 0) release(0);
      for (size_t t = 0; t < sac_kept_.size(); ++t)
        if (sac_kept_[t]) release(static_cast<int>(t));
    }
    if (s_.input_ >= 0 && grad_of_[0] >= 0) p.input_grad_bytes = gbytes_[grad_of_[0]];
    if (rec_ && s_.input_ >= 0 && grad_of_[0] >= 0) rec_->input_grad_key = kGradKey + grad_of_[0];
    return p;
  }

 private:
  int st(int t) const { return s_.tensors_[t].storage; }
  static int ci(Cat c) { return static_cast<int>(c); }
  Cat gcat() const { return s_.grad_cat_; }
  int out_id(size_t j) const { return static_cast<int>(j) + (s_.input_ >= 0 ? 1 : 0); }

  void alloc(int s) {
    if (alive_[s]) return;
    alive_[s] = true;
    live_[ci(s_.tensors_[s].cat)] += s_.tensors_[s].bytes;
    if (rec_) cur_->push_back({true, s, s_.tensors_[s].bytes});
  }
  void free_storage(int s) {
    if (!alive_[s]) return;
    alive_[s] = false;
    live_[ci(s_.tensors_[s].cat)] -= s_.tensors_[s].bytes;
    if (rec_ && !divert_) cur_->push_back({false, s, 0});
  }
  // Recording of the allocations that are not storages of the graph.
  void rec_alloc(int64_t key, int64_t bytes) {
    if (rec_ && bytes > 0) cur_->push_back({true, key, bytes});
  }
  void rec_free(int64_t key) {
    if (rec_) cur_->push_back({false, key, 0});
  }
  // A GEMM runs now (in the pass being recorded): the first one of that pass is where its
  // thread's cuBLAS workspace is made.
  void mark_gemm() {
    if (!rec_) return;
    int64_t& at = cur_ == &rec_->forward ? rec_->forward_gemm : rec_->backward_gemm;
    if (at < 0) at = static_cast<int64_t>(cur_->size());
  }
  // A kernel temporary of `bytes`: its key (for scratch_off), or -1 when none.
  int64_t scratch_on(int64_t bytes) {
    add(Cat::scratch, bytes);
    if (!rec_ || bytes <= 0) return -1;
    const int64_t k = kScratchKey + next_scratch_++;
    rec_alloc(k, bytes);
    return k;
  }
  void scratch_off(int64_t key, int64_t bytes) {
    add(Cat::scratch, -bytes);
    if (key >= 0) rec_free(key);
  }
  void release(int s) {
    if (refs_[s] > 0 && --refs_[s] == 0 && last_use_[s] != kForever) free_storage(s);
  }
  // MEMPLAN_TRACE_SIM=1 prints the live bytes at every op (to compare with
  // MEMPLAN_TRACE_ALLOC's allocator trace when an estimate and a measurement disagree).
  static bool tracing() {
    static const bool on = std::getenv("MEMPLAN_TRACE_SIM") != nullptr;
    return on;
  }
  void track(Peak& pk, const char* where) {
    if (tracing()) std::fprintf(stderr, "  sim %-10s %-32s live %12lld\n", s_.name_.c_str(), where, static_cast<long long>(sim::total(live_)));
    if (pk.where.empty() || sim::total(live_) > pk.total()) {
      pk.bytes = live_;
      pk.where = where;
    }
  }
  void add(Cat c, int64_t b) { live_[ci(c)] += b; }

  // Gradient storages.
  int new_grad(int64_t bytes) {
    gbytes_.push_back(bytes);
    grefs_.push_back(1);
    add(gcat(), bytes);
    const int g = static_cast<int>(gbytes_.size()) - 1;
    rec_alloc(kGradKey + g, bytes);
    return g;
  }
  void drop_grad(int g) {
    if (g >= 0 && --grefs_[g] == 0) {
      add(gcat(), -gbytes_[g]);
      if (gbytes_[g] > 0) rec_free(kGradKey + g);
    }
  }

  bool wants(const Op& o, const Op::CondSave& cs) const {
    if (cs.if_grad == Op::kParams) return o.params_trainable && o.param_grad_bytes > 0;
    return rg_[cs.if_grad];
  }

  void save_for(size_t j) {
    const Op& o = s_.ops_[j];
    for (int t : o.saves) refs_[st(t)] += 1;
    for (const auto& cs : o.saves_if)
      if (wants(o, cs)) refs_[st(cs.tensor)] += 1;
    if (o.save_output) refs_[st(out_id(j))] += 1;
    if (aux_live_[j] == 0) {  // (a per-op policy may have kept it from the first forward)
      aux_live_[j] = o.saved_aux_bytes;
      add(Cat::activation, o.saved_aux_bytes);
      rec_alloc(kAuxKey + static_cast<int64_t>(j), o.saved_aux_bytes);
    }
    saved_by_op_[j] = true;
  }

  // One forward pass. grad_mode=false: nothing saved. only_recompute: the selective region.
  void forward(bool grad_mode, bool only_recompute, Peak& pk) {
    const bool drop_recompute = !opt_.checkpointed && !only_recompute;
    const bool selective_first_pass = grad_mode && drop_recompute;
    if (selective_first_pass)
      for (int s : region_inputs_) refs_[s] += 1;
    for (size_t j = 0; j < s_.ops_.size(); ++j) {
      const Op& o = s_.ops_[j];
      if (only_recompute && !o.recompute) continue;
      const int out = out_id(j);
      const int os = st(out);
      alloc(os);
      if (o.gemm) mark_gemm();  // the kernel runs into its output
      // Per-op policy, first (no-grad) forward of a checkpointed segment: keep this output for
      // backward; the recomputation reuses it (alloc above is then a no-op).
      if (!grad_mode && opt_.checkpointed && opt_.per_op_policy && o.sac_save && !sac_kept_[os]) {
        sac_kept_[os] = true;
        refs_[os] += 1;
        aux_live_[j] = o.saved_aux_bytes;  // every output of the op is cached (SDPA's logsumexp too)
        add(Cat::activation, o.saved_aux_bytes);
        rec_alloc(kAuxKey + static_cast<int64_t>(j), o.saved_aux_bytes);
      } else if (grad_mode && sac_kept_[os]) {
        // The recomputation takes the kept output out of the policy's cache (torch/utils/
        // checkpoint.py _CachedTorchDispatchMode: storage[func].pop(0) @ v2.6.0): from here on
        // only the recomputed graph and the variables that use it hold it.
        sac_kept_[os] = false;
        refs_[os] -= 1;
      }
      const bool saving = grad_mode && rg_[out] && !(o.recompute && drop_recompute);
      const int64_t fs = scratch_on(o.fwd_scratch);
      if (saving) save_for(j);
      track(pk, o.name);
      scratch_off(fs, o.fwd_scratch);
      auto try_free = [&](int rs) {
        // autocast's cache holds half copies of weights that require grad (cached_cast).
        const bool cached = s_.tensors_[rs].cat == Cat::weight_copy && !grad_mode && s_.producer_[rs] >= 0 &&
                            !s_.ops_[s_.producer_[rs]].uncached;
        if (refs_[rs] == 0 && !cached) free_storage(rs);
      };
      if (only_recompute) {
        for (int r : o.reads)
          if (last_recompute_use(st(r)) == static_cast<int>(j)) try_free(st(r));
      } else {
        for (int rs : dies_after_[j]) try_free(rs);
      }
      const int lu_out = only_recompute ? last_recompute_use(os) : last_use_[os];
      if (lu_out < static_cast<int>(j) && refs_[os] == 0 && last_use_[os] != kForever) free_storage(os);
    }
  }

  int last_recompute_use(int s) const {
    int lu = -1;
    for (size_t j = 0; j < s_.ops_.size(); ++j) {
      if (!s_.ops_[j].recompute) continue;
      for (int r : s_.ops_[j].reads)
        if (st(r) == s) lu = static_cast<int>(j);
    }
    return lu;
  }

  void backward(Profile& p) {
    const size_t m = s_.ops_.size();
    bool recomputed = false;
    for (size_t jj = m; jj-- > 0;) {
      const Op& o = s_.ops_[jj];
      if (o.recompute && !recomputed && !opt_.checkpointed) {
        forward(/*grad_mode=*/true, /*only_recompute=*/true, p.backward);
        recomputed = true;
      }
      const int out = out_id(jj);
      const int g_out = grad_of_[out];
      if (g_out >= 0) {
        const size_t op_events_from = rec_ ? cur_->size() : 0;
        const int64_t pgrad = o.params_trainable ? o.param_grad_bytes : 0;
        if (o.aux_holds_param_grad && saved_by_op_[jj]) {  // the saved gradient becomes .grad
          const int64_t moved = std::min(pgrad, aux_live_[jj]);
          add(Cat::activation, -moved);
          aux_live_[jj] -= moved;
          if (rec_ && moved > 0) {  // (recorded as the buffer freed and the rest kept anew)
            rec_free(kAuxKey + static_cast<int64_t>(jj));
            rec_alloc(kAuxKey + static_cast<int64_t>(jj), aux_live_[jj]);
          }
        }
        add(Cat::scratch, o.bwd_scratch);
        add(Cat::param_grad, pgrad);
        std::vector<int64_t> transient;  // contributions added in place, freed after the op
        for (size_t i = 0; i < o.grad_to.size(); ++i) {
          const int in = o.grad_to[i];
          if (!rg_[in]) continue;
          int contribution;
          if (o.split_parts > 0) {
            // Keep this chunk's gradient; the last chunk to arrive makes the whole input's.
            auto& pending = split_pending_[in];
            pending.push_back(g_out);
            grefs_[g_out] += 1;
            if (static_cast<int>(pending.size()) < o.split_parts) continue;
            contribution = new_grad(s_.tensors_[in].bytes);
            track(p.backward, o.name);
            for (int g : pending) drop_grad(g);
            pending.clear();
          } else if (o.grad_passthrough ||
              std::find(o.grad_share.begin(), o.grad_share.end(), in) != o.grad_share.end()) {
            contribution = g_out;
            grefs_[g_out] += 1;
          } else {
            const int64_t gb = i < o.grad_bytes.size() ? o.grad_bytes[i] : s_.tensors_[in].bytes;
            contribution = new_grad(gb);
          }
          const int existing = grad_of_[in];
          if (existing < 0) {
            grad_of_[in] = contribution;
          } else if (grefs_[existing] == 1) {
            transient.push_back(contribution);  // added in place into the existing buffer
          } else {
            // The buffer is shared: out of place, old + new.
            const int sum = new_grad(gbytes_[existing]);
            transient.push_back(contribution);
            drop_grad(existing);
            grad_of_[in] = sum;
          }
        }
        // Recorded in the order the node runs: the inputs' gradients first (above), then the
        // weight's temporary and gradient.
        int64_t bs = -1;
        if (rec_ && o.bwd_scratch > 0) rec_alloc(bs = kScratchKey + next_scratch_++, o.bwd_scratch);
        std::vector<int64_t> pkeys;
        if (rec_ && pgrad > 0) {
          std::vector<int64_t> parts = o.param_grad_parts;
          if (parts.empty()) parts.push_back(pgrad);
          for (int64_t b : parts) {
            pkeys.push_back(kParamGradKey + next_param_grad_++);
            rec_alloc(pkeys.back(), b);
          }
        }
        // The node's first GEMM runs into the first gradient it made (MmBackward0 computes the
        // input's gradient, then the weight's: torch/csrc/autograd/generated/Functions.cpp).
        if (o.gemm && rec_ && cur_ == &rec_->backward && rec_->backward_gemm < 0) {
          int64_t at = static_cast<int64_t>(op_events_from);
          while (at < static_cast<int64_t>(cur_->size()) && !(*cur_)[at].alloc) ++at;
          rec_->backward_gemm = std::min<int64_t>(at + 1, static_cast<int64_t>(cur_->size()));
        }
        track(p.backward, o.name);
        scratch_off(bs, o.bwd_scratch);
        for (int g : transient) drop_grad(static_cast<int>(g));
        drop_grad(g_out);
        grad_of_[out] = -1;
        if (o.bwd_post_scratch > 0) {
          const int64_t ps = scratch_on(o.bwd_post_scratch);
          track(p.backward, (std::string(o.name) + " + gradient accumulation").c_str());
          scratch_off(ps, o.bwd_post_scratch);
        }
        if (opt_.step_temps_per_grad_byte > 0 && pgrad > 0) {
          // The op's node has returned; AccumulateGrad wrote .grad and its hook steps it.
          const int64_t t = static_cast<int64_t>(std::llround(opt_.step_temps_per_grad_byte * static_cast<double>(pgrad)));
          const int64_t ts = scratch_on(t);
          track(p.backward, (std::string(o.name) + " + optimizer step").c_str());
          scratch_off(ts, t);
        }
        if (!opt_.grads_persist) {
          add(Cat::param_grad, -pgrad);
          for (int64_t k : pkeys) rec_free(k);
        } else if (rec_) {
          rec_->param_grads.insert(rec_->param_grads.end(), pkeys.begin(), pkeys.end());
        }
        p.param_grad_bytes += pgrad;
      }
      if (saved_by_op_[jj]) {
        for (int t : o.saves) release(st(t));
        for (const auto& cs : o.saves_if)
          if (wants(o, cs)) release(st(cs.tensor));
        if (o.save_output) release(st(out));
        add(Cat::activation, -aux_live_[jj]);
        if (aux_live_[jj] > 0) rec_free(kAuxKey + static_cast<int64_t>(jj));
        aux_live_[jj] = 0;
        saved_by_op_[jj] = false;
      }
      // The first op of a selective region releases the region's inputs.
      if (o.recompute && (jj == 0 || !s_.ops_[jj - 1].recompute) && !opt_.checkpointed)
        for (int s : region_inputs_) release(s);
    }
  }

  const Segment& s_;
  const SimOptions& opt_;
  SimRecord* rec_ = nullptr;
  std::vector<SimEvent>* cur_ = nullptr;  // the pass being recorded
  bool divert_ = false;                   // a free that goes to autocast_frees
  int64_t next_scratch_ = 0, next_param_grad_ = 0;
  CatBytes live_{};
  std::vector<bool> alive_;
  std::vector<int> refs_;       // saved references per storage
  std::vector<int> last_use_;   // last forward op reading (or holding) each storage
  std::vector<std::vector<int>> dies_after_;  // per op: storages whose last use it is
  std::vector<bool> rg_;        // requires_grad per tensor
  std::vector<int> grad_of_;    // gradient storage per tensor (-1: none)
  std::vector<int64_t> gbytes_; // gradient storages
  std::vector<int> grefs_;
  std::vector<int64_t> aux_live_;
  std::vector<bool> saved_by_op_;
  std::vector<int> region_inputs_;
  std::map<int, std::vector<int>> split_pending_;  // per split input: chunk gradients waiting
  std::vector<bool> sac_kept_;  // storages the per-op checkpoint policy keeps
};

Profile Segment::simulate(const SimOptions& opt) const {
  Runner r(*this, opt);
  return r.run();
}

std::vector<Segment::SavedRow> Segment::saved_rows() const {
  std::vector<SavedRow> rows;
  std::vector<bool> listed(tensors_.size(), false);
  auto add_row = [&](const Op& o, int t) {
    const int s = tensors_[t].storage;
    if (listed[s]) return;
    listed[s] = true;
    // "what is saved -> which op saves it": the storage's producer (or the segment input).
    const std::string made_by = producer_[s] < 0 ? "layer input" : ops_[producer_[s]].name;
    rows.push_back({made_by == o.name ? std::string(o.name) : made_by + " -> " + o.name, tensors_[s].bytes, tensors_[s].cat});
  };
  const int first = input_ >= 0 ? 1 : 0;
  for (size_t j = 0; j < ops_.size(); ++j) {
    const Op& o = ops_[j];
    if (o.recompute) continue;
    for (int t : o.saves) add_row(o, t);
    for (const auto& cs : o.saves_if)
      if (cs.if_grad != Op::kParams || (o.params_trainable && o.param_grad_bytes > 0)) add_row(o, cs.tensor);
    if (o.save_output) add_row(o, static_cast<int>(j) + first);
    if (o.saved_aux_bytes) rows.push_back({o.name, o.saved_aux_bytes, Cat::activation});
  }
  return rows;
}

}  // namespace memplan::sim
