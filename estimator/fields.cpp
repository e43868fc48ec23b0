// The switch registry's rows (fields.h). The path of each row is the spelling of its member, so
// the path and the member it reads cannot disagree.
#include "estimator/fields.h"

#include "estimator/error.h"

namespace memplan {

namespace {

// One row: the path is the member's own spelling (runtime.liger reads and writes s.runtime.liger).
#define MEMPLAN_SWITCH(id, member, flag, help, aliases, default_source, shown, in_effect)                              \
  SwitchField {                                                                                                        \
    Switch::id, #member, flag, help, aliases, [](const TrainingSetup& s) { return s.member; },                       \
        [](TrainingSetup& s, bool v) { s.member = v; }, default_source, shown, in_effect                              \
  }

using Aliases = std::array<const char*, 3>;
constexpr Aliases kNone = {nullptr, nullptr, nullptr};

std::array<SwitchField, kSwitchCount> make_rows() {
  return {{
      MEMPLAN_SWITCH(loss_upcast, runtime.loss_upcast, "--loss-upcast",
                     "the loss upcasts the logits to fp32 first (HF's ForCausalLMLoss; off: cross-entropy in their dtype)",
                     (Aliases{"logits_upcast", nullptr, nullptr}),
                     "transformers >= 4.46 ForCausalLMLoss: logits.float() (src/transformers/loss/loss_utils.py @ v4.46.0)",
                     nullptr, nullptr),
      MEMPLAN_SWITCH(keep_logits, runtime.keep_logits, "--keep-logits",
                     "the loop keeps the logits until the next forward (custom loops, LitGPT)", kNone,
                     "the HF Trainer's compute_loss drops the model's outputs before backward", "keeps logits", nullptr),
      MEMPLAN_SWITCH(keep_cache, runtime.keep_cache, "--keep-cache",
                     "the loop keeps the returned KV cache too (use_cache=True)", kNone,
                     "training loops run with use_cache=False or drop the outputs", "keeps KV cache", nullptr),
      MEMPLAN_SWITCH(zero_grad_set_to_none, runtime.zero_grad_set_to_none, "--zero-grad-set-to-none",
                     "zero_grad(set_to_none=True) frees the gradients between steps (off: they stay allocated; the "
                     "default follows --torch-version)",
                     (Aliases{"set_to_none", nullptr, nullptr}),
                     "torch >= 2.0 Optimizer.zero_grad(set_to_none=True) (torch/optim/optimizer.py @ v2.0.0); False before",
                     nullptr, nullptr),
      MEMPLAN_SWITCH(zero_grad_after_forward, runtime.zero_grad_after_forward, "--zero-grad-after-forward",
                     "the last step's gradients live through the next forward (Lightning's order)", kNone,
                     "zero_grad before the forward (the HF Trainer, torchtune)", "zero_grad after forward", nullptr),
      MEMPLAN_SWITCH(liger, runtime.liger, "--liger", "Liger kernels: fused RMSNorm, SwiGLU, RoPE (and fused-linear loss)",
                     kNone, "off unless the config turns it on (use_liger_kernel, liger_kernel)", "Liger kernels", nullptr),
      MEMPLAN_SWITCH(optimizer_in_backward, runtime.optimizer_in_backward, "--optimizer-in-backward",
                     "step each parameter in backward and free its gradient (torchtune optimizer_in_bwd)",
                     (Aliases{"optimizer_in_bwd", nullptr, nullptr}), "torchtune's optimizer_in_bwd defaults to False",
                     "optimizer in backward", nullptr),
      MEMPLAN_SWITCH(activation_offload, runtime.activation_offload, "--activation-offload",
                     "saved activations go to pinned host memory", (Aliases{"offload_activations", nullptr, nullptr}),
                     "torchtune's enable_activation_offloading defaults to False", "activation offload", nullptr),
      MEMPLAN_SWITCH(compile, runtime.compile, "--compile", "torch.compile per block (default partitioner; approximated)",
                     kNone, "eager unless the config compiles", "torch.compile", nullptr),
      MEMPLAN_SWITCH(compile_loss, runtime.compile_loss, "--compile-loss",
                     "the loss compiled too: 16-bit logits and a logsumexp saved, not fp32 log-probabilities (default: "
                     "with --compile under torchtune, torchtitan and the HF Trainer)",
                     kNone, "the framework's rule (estimator/runtime.cpp); off without compile", "compiled loss", nullptr),
      MEMPLAN_SWITCH(fsdp_no_sync, runtime.fsdp_no_sync, "--fsdp-no-sync",
                     "FSDP1 no_sync() on accumulating micro-steps: whole unsharded gradients kept (default: LitGPT)",
                     (Aliases{"no_sync", nullptr, nullptr}), "the framework's rule (estimator/runtime.cpp); off outside LitGPT",
                     "FSDP no_sync under accumulation",
                     [](const TrainingSetup& s) { return s.parallel.fsdp != FsdpMode::none && s.batch.grad_accum > 1; }),
      MEMPLAN_SWITCH(fp8, runtime.fp8, "--fp8", "float8 linears (torchao Float8Linear / Transformer Engine)", kNone,
                     "off unless the config asks for float8 training", "fp8 linears", nullptr),
      MEMPLAN_SWITCH(fp8_recompute_weight, runtime.fp8_recompute_weight, "--fp8-recompute-weight",
                     "float8: the weight cast again in backward, not saved (force_recompute_fp8_weight_in_bwd)",
                     (Aliases{"force_recompute_fp8_weight_in_bwd", nullptr, nullptr}),
                     "torchao Float8LinearConfig.force_recompute_fp8_weight_in_bwd defaults to False",
                     "fp8 weight recomputed in backward", [](const TrainingSetup& s) { return s.runtime.fp8; }),
      MEMPLAN_SWITCH(expandable_segments, runtime.expandable_segments, "--expandable-segments",
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (less fragmentation)", kNone,
                     "PyTorch's caching allocator: expandable_segments False by default (c10/cuda/CUDAAllocatorConfig.h)",
                     "expandable segments", nullptr),
      MEMPLAN_SWITCH(double_quant, finetune.double_quant, "--double-quant",
                     "QLoRA: quantize the NF4 block scales too (default on)",
                     (Aliases{"bnb_4bit_use_double_quant", "use_double_quant", nullptr}),
                     "the QLoRA recipe: qlora.py's --double_quant defaults to True (artidoro/qlora)",
                     nullptr, nullptr),
      MEMPLAN_SWITCH(sequence_parallel, parallel.sequence_parallel, "--sequence-parallel",
                     "with tensor parallelism: the norms' and residuals' activations sharded over the sequence (Megatron "
                     "--sequence-parallel; torchtitan's default)",
                     kNone, "Megatron's --sequence-parallel defaults to off", nullptr, nullptr),
  }};
}

#undef MEMPLAN_SWITCH

}  // namespace

const std::array<SwitchField, kSwitchCount>& switch_fields() {
  static const std::array<SwitchField, kSwitchCount> rows = [] {
    auto r = make_rows();
    for (size_t i = 0; i < r.size(); ++i)
      MEMPLAN_CHECK(static_cast<size_t>(r[i].id) == i, std::string("switch registry: row ") + r[i].path + " out of order");
    return r;
  }();
  return rows;
}

const SwitchField& field(Switch id) {
  const size_t i = static_cast<size_t>(id);
  MEMPLAN_CHECK(i < kSwitchCount, "switch registry: no such switch");
  return switch_fields()[i];
}

std::string SwitchField::section() const {
  const std::string p = path;
  return p.substr(0, p.find('.'));
}

std::string SwitchField::key() const {
  const std::string p = path;
  return p.substr(p.rfind('.') + 1);
}

std::string SwitchField::negation() const { return std::string("--no-") + (flag + 2); }

}  // namespace memplan
