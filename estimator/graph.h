// A small model of what autograd keeps alive. A segment of the network (the embedding, one
// transformer layer, the head and loss) is written as the sequence of ops the modelling code
// runs; each op says what it allocates, what it saves for backward and what its backward
// allocates. Segment::simulate walks forward and then backward and reports the live bytes by
// category at the segment's peaks. It does not know about layers or models: estimate.cpp composes
// segment profiles into the step's timeline.
//
// Rules it follows (docs/autograd-saved.md §1): a saved tensor keeps its whole storage
// alive until its op's backward has run; views share storage; a tensor nobody saves is freed
// after its last forward use; an op's backward allocates its inputs' gradients, frees its
// output's gradient and releases its saved tensors; a second gradient contribution to the same
// tensor is allocated and then added in place.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace memplan::sim {

// What a live byte is charged to; estimate.cpp maps these to the MemoryBreakdown terms.
enum class Cat : uint8_t {
  activation,   // forward tensors (saved, or alive until their last forward use)
  loss,         // logits, log-probabilities and their gradients
  weight_copy,  // autocast's cached half-precision copies of weights, saved by matmuls
  act_grad,     // gradients of activations during backward
  scratch,      // kernel temporaries that are not tensors of the graph
  param_grad,   // parameter gradients (.grad)
  kCount
};
constexpr int kNumCats = static_cast<int>(Cat::kCount);
using CatBytes = std::array<int64_t, kNumCats>;

int64_t total(const CatBytes& c);

// One op of a segment. Tensors are ids returned by Segment::input / Segment::op.
struct Op {
  const char* name = "";
  std::vector<int> reads;       // tensors the forward reads (keeps them alive until here)
  int64_t out_bytes = 0;        // new output storage (0 with alias_of)
  int alias_of = -1;            // output is a view of this tensor (no allocation)
  int64_t view_bytes = 0;       // a view's own size (a slice); 0: the whole aliased tensor
  Cat out_cat = Cat::activation;
  bool save_output = false;     // the output itself is saved for backward
  std::vector<int> saves;       // tensors saved for backward (when anything needs a gradient)
  // Conditional saves (derivatives.yaml guards): save `tensor` only if `if_grad` requires grad;
  // if_grad == kParams means "if this op's parameters are trainable".
  struct CondSave { int tensor; int if_grad; };
  static constexpr int kParams = -2;
  std::vector<CondSave> saves_if;
  int64_t saved_aux_bytes = 0;  // extra buffers created in forward and kept only for backward
                                // (LayerNorm mean/rstd, dropout noise, top-k indices)
  bool aux_holds_param_grad = false;  // saved_aux_bytes includes the parameter gradient a fused
                                      // kernel made in forward; backward hands that storage over
                                      // as .grad (param_grad_bytes of it) instead of a new one
  int64_t fwd_scratch = 0;      // temporary during the forward kernel
  std::vector<int> grad_to;     // inputs that receive a gradient
  std::vector<int64_t> grad_bytes;  // bytes of each such gradient (empty: the input's bytes)
  bool grad_passthrough = false;    // view-like: the output's gradient is reused as every input's
  // > 0: this op is one of `split_parts` chunk views of `alias_of` (torch.chunk / split). Their
  // gradients are kept until all have arrived; then SplitBackward concatenates them into one
  // gradient of the whole input and frees them (torch/csrc/autograd/FunctionsManual.cpp
  // split_backward: at::cat of the grads).
  int split_parts = 0;
  std::vector<int> grad_share;      // inputs that reuse the output's gradient (others get new ones)
  int64_t bwd_scratch = 0;      // temporary during the backward kernel
  int64_t bwd_post_scratch = 0; // alive just after the node returns (its output gradient freed):
                                // a shared weight's gradient contribution and, on 1.13, the
                                // out-of-place sum made in its input buffer
  int64_t param_grad_bytes = 0; // parameter gradient produced by this op's backward
  // The parameter gradients as separate tensors (a weight's and a bias's), summing to
  // param_grad_bytes; empty: one tensor. Only the allocation sequence (SimRecord) uses it.
  std::vector<int64_t> param_grad_parts;
  bool params_trainable = true; // false: frozen weights (LoRA base), no gradient for them
  bool tied_params = false;     // its parameter's .grad is another op's (a tied embedding): no
                                // param_grad_bytes here, but the output needs a gradient and the
                                // backward runs (its contribution is a temporary added into .grad)
  bool uncached = false;        // a weight copy autocast does not cache (the weight is frozen)
  bool recompute = false;       // selective checkpointing: saves dropped, recomputed in backward
  bool sac_save = false;        // per-op selective checkpointing: the output is kept by the
                                // checkpoint (not recomputed) when the segment is checkpointed
                                // with SimOptions::per_op_policy
  bool gemm = false;            // forward and backward run cuBLAS GEMMs (mm, addmm, bmm): the
                                // first one a thread runs makes its handle's workspace
};

// Live bytes of this segment at its peak, and the peak's total.
struct Peak {
  CatBytes bytes{};
  std::string where;  // the op whose execution made the peak
  int64_t total() const { return sim::total(bytes); }
};

// What composing needs to know about one segment.
struct Profile {
  CatBytes retained{};       // alive after forward (saved tensors, incl. the input if saved)
  int64_t output_bytes = 0;  // the segment output (next segment's input)
  int64_t input_grad_bytes = 0;  // gradient left for the previous segment
  int64_t param_grad_bytes = 0;  // parameter gradients produced (persist when micro-step 1)
  int64_t forward_cache = 0;  // autocast-cached weight copies a no-grad (checkpointed) forward
                              // leaves alive until autocast exits at the end of the forward
  Peak forward;   // own live bytes at the forward peak (includes the input while alive)
  Peak backward;  // own live bytes at the backward peak (retained not yet freed, grads, temps)
};

// The tensor allocations and frees of a simulate() run, in order, for the caching-allocator
// model (estimator/sequence.h unrolls a step from them). Keys name the segment's storages
// (saved tensors, gradients, kernel temporaries, parameter gradients); sequence.cpp maps the
// input, output and their gradients onto the neighbouring segments' tensors.
struct SimEvent {
  bool alloc = true;
  int64_t key = 0;
  int64_t bytes = 0;  // alloc only
};
struct SimRecord {
  std::vector<SimEvent> forward;   // the forward pass (the first, no-grad one when checkpointed)
  std::vector<SimEvent> backward;  // from the output's gradient arriving to the segment's end
  std::vector<int64_t> autocast_frees;  // weight copies freed when the autocast region exits
  std::vector<int64_t> param_grads;     // parameter gradients alive at the end (.grad)
  // Storages the loop keeps past the step (Segment::keep): their frees in the record wait until
  // the loop lets go of them (the allocation sequence frees them after the next forward).
  std::vector<int64_t> kept;
  int64_t input_key = -1;        // the segment's input storage (the previous segment's output)
  int64_t output_key = -1;       // the output storage (the next segment's input)
  int64_t output_grad_key = -1;  // the output's gradient (made by the next segment's backward)
  int64_t input_grad_key = -1;   // the gradient left for the previous segment
  // Where the segment's first cuBLAS GEMM runs: the number of forward (backward) events before
  // it, its output already allocated; -1 when it runs none. The allocation sequence makes a
  // thread's cuBLAS workspace there (the first GEMM the thread runs asks its handle for one).
  int64_t forward_gemm = -1;
  int64_t backward_gemm = -1;
};

struct SimOptions {
  bool checkpointed = false;   // segment wrapped in activation checkpointing
  bool grads_persist = true;   // parameter grads stay (.grad stolen); false: accumulated into
                               // existing .grad, so each contribution is a temporary
  bool input_requires_grad = true;  // false below frozen embeddings (LoRA): no input gradient
  // Optimizer stepped in backward: a parameter's step runs from its AccumulateGrad hook right
  // after the op that made its gradient, with this many bytes of temporaries per byte of that
  // gradient; the gradient is dropped after the step (grads_persist false).
  double step_temps_per_grad_byte = 0;
  bool per_op_policy = false;  // checkpointed with a per-op policy: ops marked sac_save keep
                               // their outputs from the first forward (torch.utils.checkpoint
                               // with a context_fn / selective_checkpoint_context_fn)
  SimRecord* record = nullptr;  // when set, every allocation and free is appended to it
};

class Segment {
 public:
  explicit Segment(std::string name) : name_(std::move(name)) {}

  // The tensor the segment starts from (previous segment's output); charged to this segment's
  // live bytes while alive, counted in `retained` if an op saves it.
  int input(int64_t bytes, Cat cat = Cat::activation);
  // Adds an op; returns its output tensor id.
  int op(Op o);
  // The segment's output (kept alive at the end of forward).
  void output(int t) { output_ = t; }
  // Keeps tensor `t` alive through the latest op, as a Python variable that still refers to it
  // would (HF's `residual`, an argument held by the caller, a returned attn_weights).
  void hold(int t);
  // A tensor the training loop keeps past the segment (the returned logits of a loop that keeps
  // the model's outputs): recorded in SimRecord::kept; the simulation's own profile is unchanged
  // (the estimator adds what the loop holds to its phases).
  void keep(int t) { kept_.push_back(t); }
  // Marks the op that produced tensor `t` for recomputation (selective checkpointing).
  void mark_recompute(int t);
  // The gradient category of tensors of this segment (Cat::loss in the head).
  void grad_category(Cat c) { grad_cat_ = c; }

  Profile simulate(const SimOptions& opt) const;

  // Saved tensors of a plain forward, one row per storage, for the per-layer table.
  struct SavedRow { std::string op; int64_t bytes; Cat cat; };
  std::vector<SavedRow> saved_rows() const;
  const std::string& name() const { return name_; }

 private:
  struct Tensor { int64_t bytes; int storage; Cat cat; };
  std::string name_;
  std::vector<Tensor> tensors_;
  std::vector<Op> ops_;
  std::vector<int> producer_;  // per tensor: producing op index, -1 for the input
  std::vector<std::pair<int, int>> holds_;  // (tensor, op index it lives through)
  std::vector<int> kept_;                   // keep()
  int input_ = -1;
  int output_ = -1;
  Cat grad_cat_ = Cat::act_grad;

  friend class Runner;
};

}  // namespace memplan::sim
