// The frameworks' runtime defaults (runtime.h). Each row was read in the framework's source at the
// version named in its citation; a row applies only where the user did not set the field.
#include "estimator/runtime.h"

#include "estimator/fields.h"

#include <fmt/format.h>

namespace memplan {
namespace {

// A row of the table: when it applies (given the setup), what it sets, and where it was read.
struct Row {
  const char* field;
  std::function<bool(const TrainingSetup&)> applies;  // null: always
  std::function<std::string(TrainingSetup&)> set;     // sets the field, returns the value as printed
  const char* source;
};

std::string yes(bool b) { return b ? "true" : "false"; }

// HF models pick SDPA when torch has it (is_torch_sdpa_available: torch >= 2.1.1 in 4.x; always
// in 5.x) and eager before; so do the frameworks that run HF models.
Row hf_attention(const char* source) {
  return {path(Choice::attention), nullptr,
          [](TrainingSetup& s) {
            s.attention = s.runtime.torch_at_least(2, 1) ? AttentionImpl::sdpa : AttentionImpl::eager;
            return std::string(to_string(s.attention));
          },
          source};
}
Row attention(AttentionImpl a, const char* source) {
  return {path(Choice::attention), nullptr, [a](TrainingSetup& s) { s.attention = a; return std::string(to_string(a)); }, source};
}
Row keep_logits(bool v, const char* source) {
  return {path(Switch::keep_logits), nullptr, [v](TrainingSetup& s) { s.runtime.keep_logits = v; return yes(v); }, source};
}
Row loss(const char* spelling, const char* source) {
  return {memplan::path(Choice::loss), nullptr,
          [spelling](TrainingSetup& s) {
            parse_loss(spelling, &s.runtime);
            return to_string(s.runtime, s.runtime.loss);
          },
          source};
}
Row loss_upcast(bool upcast, const char* source) {
  return {path(Switch::loss_upcast), nullptr, [upcast](TrainingSetup& s) { s.runtime.loss_upcast = upcast; return yes(upcast); }, source};
}
Row optimizer_impl(OptimizerImpl impl, const char* source) {
  return {memplan::path(Choice::optimizer_impl), nullptr,
          [impl](TrainingSetup& s) { s.runtime.optimizer_impl = impl; return std::string(to_string(impl)); }, source};
}
// The loss compiled whenever the framework compiles (runtime.compile as the config or flag set it).
Row compile_loss(const char* source) {
  return {path(Switch::compile_loss), nullptr,
          [](TrainingSetup& s) {
            s.runtime.compile_loss = s.runtime.compile;
            return yes(s.runtime.compile_loss);
          },
          source};
}
Row adapters_in_model_dtype(const char* source) {
  return {memplan::path(Choice::adapter_dtype), nullptr, [](TrainingSetup& s) { s.finetune.adapter_fp32 = false; return std::string("model"); },
          source};
}
Row fsdp_no_sync(bool v, const char* source) {
  return {path(Switch::fsdp_no_sync), nullptr, [v](TrainingSetup& s) { s.runtime.fsdp_no_sync = v; return yes(v); }, source};
}
// Sharded data parallelism over several ranks, unless DeepSpeed or tensor/pipeline parallelism
// was asked for.
Row fsdp_when_ranks(const char* source) {
  return {memplan::path(Choice::fsdp),
          [](const TrainingSetup& s) { return s.parallel.data_parallel() > 1 && s.parallel.zero_stage == 0; },
          [](TrainingSetup& s) { s.parallel.fsdp = FsdpMode::full_shard; return std::string("full"); }, source};
}

const std::vector<Row>& rows(Framework f) {
  static const std::vector<Row> hf = {
      hf_attention("transformers src/transformers/utils/import_utils.py is_torch_sdpa_available (torch >= 2.1.1) @ v4.52.4"),
      keep_logits(false, "transformers src/transformers/trainer.py Trainer.compute_loss returns the loss only @ v4.52.4"),
      loss("standard", "transformers src/transformers/loss/loss_utils.py ForCausalLMLoss (logits.float()) @ v4.46+"),
      loss_upcast(true, "transformers src/transformers/loss/loss_utils.py ForCausalLMLoss (logits.float()) @ v4.46+"),
      optimizer_impl(OptimizerImpl::automatic,
                     "transformers src/transformers/training_args.py optim adamw_torch -> torch.optim.AdamW(foreach=None): "
                     "foreach on CUDA @ v4.52.4"),
      fsdp_no_sync(true, "transformers src/transformers/trainer.py training loop (PR #34645): every micro-batch but the last "
                         "inside self.accelerator.no_sync(model); accelerate src/accelerate/accelerator.py @ v1.10.1 "
                         "L1134-1173 no_sync: the FSDP1 wrapper's no_sync()"),
      compile_loss("transformers src/transformers/trainer.py _wrap_model: torch.compile(model) with torch_compile, and the "
                   "model's forward computes its loss (models/llama/modeling_llama.py LlamaForCausalLM.forward "
                   "self.loss_function) @ v4.52.4"),
  };
  static const std::vector<Row> custom = {
      hf_attention("the model's own attention: HF models pick SDPA on torch >= 2.1.1 (import_utils.py @ v4.52.4)"),
      keep_logits(true, "nanoGPT train.py @ 3adf61e1 L300-314 (logits rebound only by the next forward); llama2.c "
                        "train.py @ 350e04fe L297-320; accelerate examples/nlp_example.py @ v1.7.0 L160-170"),
      loss("standard", "the model's loss: HF ForCausalLMLoss (logits.float()) @ v4.46+"),
      loss_upcast(true, "the model's loss: HF ForCausalLMLoss (logits.float()) @ v4.46+"),
  };
  static const std::vector<Row> lightning = {
      hf_attention("the LightningModule's model: HF models pick SDPA on torch >= 2.1.1 (import_utils.py @ v4.52.4)"),
      keep_logits(false, "src/lightning/pytorch/loops/optimization/automatic.py @ 2.5.1 L56-86: only training_step's "
                         "returned loss is kept"),
      {path(Switch::zero_grad_after_forward), nullptr,
       [](TrainingSetup& s) { s.runtime.zero_grad_after_forward = true; return std::string("true"); },
       "src/lightning/pytorch/loops/optimization/automatic.py @ 2.5.1 L130-140 (closure: training_step, then "
       "zero_grad, then backward)"},
      fsdp_no_sync(true, "src/lightning/pytorch/loops/optimization/automatic.py @ 2.6.5 L174-185 (accumulating steps in "
                         "_block_parallel_sync_behavior) -> strategies/parallel.py L116-127 block_backward_sync: the FSDP1 "
                         "wrapper's no_sync(); Fabric: strategies/fsdp.py L745-761 _FSDPBackwardSyncControl"),
  };
  static const std::vector<Row> torchtune = {
      attention(AttentionImpl::sdpa, "torchtune/modules/attention.py @ v0.6.1 (F.scaled_dot_product_attention)"),
      keep_logits(false, "recipes/full_finetune_single_device.py @ v0.6.1 L632-653 (del logits before backward)"),
      loss("chunked:8", "torchtune/modules/loss/ce_chunked_output_loss.py @ v0.6.1 CEWithChunkedOutputLoss "
                              "(num_output_chunks=8, logits.float() per chunk), the loss of its recipe configs"),
      loss_upcast(true, "torchtune/modules/loss/ce_chunked_output_loss.py @ v0.6.1 CEWithChunkedOutputLoss "
                              "(num_output_chunks=8, logits.float() per chunk), the loss of its recipe configs"),
      fsdp_when_ranks("torchtune/training/_distributed.py @ v0.6.1 L519-568 (fully_shard per layer, "
                      "reshard_after_forward=True, no MixedPrecisionPolicy)"),
      adapters_in_model_dtype("recipes/lora_finetune_single_device.py @ v0.6.1 (the model, LoRA adapters included, built "
                              "under training.set_default_dtype(self._dtype))"),
      {path(Switch::compile_loss), nullptr,
       [](TrainingSetup& s) {
         s.runtime.compile_loss =
             s.runtime.compile && (s.runtime.loss == LossImpl::chunked || s.finetune.mode != FinetuneMode::full);
         return yes(s.runtime.compile_loss);
       },
       "recipes/full_finetune_single_device.py @ 1814feb17 (compile: training.compile_loss(self._loss_fn), its return value "
       "dropped: torchtune/training/_compile.py compiles CEWithChunkedOutputLoss.compute_cross_entropy in place, any other "
       "loss stays eager); recipes/lora_finetune_single_device.py @ 1814feb17 L295-296 keeps it (self._loss_fn = "
       "training.compile_loss(self._loss_fn)): every loss compiled"},
  };
  static const std::vector<Row> torchtitan = {
      attention(AttentionImpl::sdpa, "torchtitan/models/llama3/model.py @ v0.2.2 (F.scaled_dot_product_attention)"),
      keep_logits(false, "torchtitan/train.py @ v0.2.2 L532-542 (del pred before backward)"),
      loss("standard", "torchtitan/components/loss.py @ v0.2.2 L20-27 (cross_entropy(pred.float()))"),
      loss_upcast(true, "torchtitan/components/loss.py @ v0.2.2 L20-27 (cross_entropy(pred.float()))"),
      optimizer_impl(OptimizerImpl::fused, "torchtitan/config/job_config.py @ v0.2.2 L151-155 (implementation: fused)"),
      fsdp_when_ranks("torchtitan/models/llama3/infra/parallelize.py @ v0.2.2 L319-356 (fully_shard per block, "
                      "MixedPrecisionPolicy(bf16 params, fp32 reduce))"),
      {path(Switch::sequence_parallel), [](const TrainingSetup& s) { return s.parallel.tensor_parallel > 1; },
       [](TrainingSetup& s) { s.parallel.sequence_parallel = true; return std::string("true"); },
       "torchtitan/models/llama3/infra/parallelize.py @ v0.2.2 apply_tp (SequenceParallel on the norms, the embedding's "
       "output Shard(1), the linears' inputs all-gathered from Shard(1))"},
      compile_loss("torchtitan/config/job_config.py Compile.components default [\"model\", \"loss\"]; "
                   "torchtitan/components/loss.py BaseLoss._maybe_compile (torch.compile of the loss) @ 00a388d9"),
  };
  static const std::vector<Row> litgpt = {
      attention(AttentionImpl::sdpa, "litgpt/model.py @ v0.5.7 CausalSelfAttention (F.scaled_dot_product_attention)"),
      keep_logits(true, "litgpt/finetune/lora.py @ v0.5.7 L321-331 (logits alive through backward and the step)"),
      loss("chunked:128t", "litgpt/utils.py @ v0.5.7 L294-340 chunked_cross_entropy(chunk_size=128), no fp32 upcast"),
      loss_upcast(false, "litgpt/utils.py @ v0.5.7 L294-340 chunked_cross_entropy(chunk_size=128), no fp32 upcast"),
      fsdp_when_ranks("litgpt/finetune/lora.py @ v0.5.7 L143-157 (FSDPStrategy when devices > 1)"),
      adapters_in_model_dtype("litgpt/finetune/lora.py @ v0.5.7 (fabric.init_module builds the model, adapters included, "
                              "in the precision's dtype: bf16-true -> bf16)"),
      fsdp_no_sync(true, "litgpt/finetune/lora.py @ v0.5.7 (fabric.no_backward_sync(model, enabled=is_accumulating)); "
                         "lightning src/lightning/fabric/strategies/fsdp.py _FSDPBackwardSyncControl: FSDP1 no_sync()"),
  };
  static const std::vector<Row> deepspeed = {
      hf_attention("the engine's model: HF models pick SDPA on torch >= 2.1.1 (import_utils.py @ v4.52.4)"),
      keep_logits(false, "deepspeed/runtime/engine.py @ v0.16.4: engine(batch) returns the loss; backward(loss)"),
      loss("standard", "the model's loss: HF ForCausalLMLoss (logits.float()) @ v4.46+"),
      loss_upcast(true, "the model's loss: HF ForCausalLMLoss (logits.float()) @ v4.46+"),
      optimizer_impl(OptimizerImpl::fused, "deepspeed/ops/adam/fused_adam.py @ v0.16.4 (FusedAdam, multi-tensor apply)"),
  };
  static const std::vector<Row> megatron = {
      attention(AttentionImpl::flash, "megatron/core/transformer/dot_product_attention.py @ core_v0.13.0 (TE fused attention)"),
      keep_logits(false, "megatron/training/training.py @ core_v0.13.0 (forward_backward_func returns the losses only)"),
      loss("vocab-parallel", "megatron/core/tensor_parallel/cross_entropy.py @ d98e8a64 L20-28, L43-71, L117-193 "
                             "(_VocabParallelCrossEntropy: one fp32 copy, softmax and gradient in place)"),
      loss_upcast(true, "megatron/core/tensor_parallel/cross_entropy.py @ core_v0.13.0 (logits in fp32)"),
      optimizer_impl(OptimizerImpl::fused, "megatron/core/optimizer/__init__.py @ core_v0.13.0 L11-22 (TE/Apex FusedAdam)"),
  };
  switch (f) {
    case Framework::hf_trainer: return hf;
    case Framework::custom: return custom;
    case Framework::lightning: return lightning;
    case Framework::torchtune: return torchtune;
    case Framework::torchtitan: return torchtitan;
    case Framework::litgpt: return litgpt;
    case Framework::deepspeed: return deepspeed;
    case Framework::megatron: return megatron;
  }
  return hf;
}

}  // namespace

const std::vector<std::string>& framework_fields() {
  static const std::vector<std::string> f = {path(Choice::attention), path(Switch::keep_logits),    memplan::path(Choice::loss),
                                             path(Switch::loss_upcast), memplan::path(Choice::optimizer_impl), path(Switch::zero_grad_after_forward),
                                             memplan::path(Choice::fsdp), path(Switch::compile_loss), path(Switch::fsdp_no_sync),
                                             memplan::path(Choice::adapter_dtype), path(Switch::sequence_parallel)};
  return f;
}

std::vector<FrameworkDefault> apply_framework_defaults(TrainingSetup& s, const std::function<bool(const std::string&)>& is_set) {
  std::vector<FrameworkDefault> out;
  for (const Row& r : rows(s.runtime.framework)) {
    if (is_set(r.field) || (r.applies && !r.applies(s))) continue;
    out.push_back({r.field, r.set(s), r.source});
  }
  return out;
}

std::string framework_buffers_note(const TrainingSetup& s) {
  const bool half = s.precision == Precision::mixed_bf16 || s.precision == Precision::mixed_fp16 ||
                    s.precision == Precision::bf16 || s.precision == Precision::fp16;
  switch (s.runtime.framework) {
    case Framework::deepspeed:
      if (s.parallel.zero_stage == 3)
        return "DeepSpeed ZeRO-3 allocates its gradient partition and reduce bucket at start-up "
               "(deepspeed/runtime/zero/stage3.py @ v0.16.4 L536-556, L1027-1066)";
      if (s.parallel.zero_stage <= 1 && half && s.precision != Precision::fp16 && s.precision != Precision::mixed_fp16)
        return "DeepSpeed BF16_Optimizer allocates an fp32 gradient buffer of every parameter at start-up "
               "(deepspeed/runtime/bf16_optimizer.py @ v0.16.4 L156-163)";
      return "";
    case Framework::megatron:
      return "Megatron's DistributedDataParallel allocates fp32 main gradients of every parameter at start-up "
             "(megatron/core/distributed/param_and_grad_buffer.py @ core_v0.13.0 L660-675)";
    default:
      return "";
  }
}

}  // namespace memplan
