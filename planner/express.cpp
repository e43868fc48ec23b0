// What each emitted format can express (emit.h: can_express, recheck_flags). A plan asked for in
// a format picks the best configuration that format can write so that it reads back the same;
// the search itself never changes with the format.
#include <fmt/format.h>

#include "planner/emit.h"
#include "planner/space.h"

namespace memplan::planner {

std::string emit_format_name(EmitFormat f) {
  for (const std::string& name : emit_format_names()) {
    EmitFormat g;
    if (parse_emit_format(name, &g) && g == f) return name;
  }
  return "?";
}

namespace {

bool none_or_full(const Checkpointing& c) { return c.mode == CheckpointMode::none || c.mode == CheckpointMode::full; }

}  // namespace

bool can_express(EmitFormat f, const TrainingSetup& s, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const Sharding sh = sharding_of(s);
  switch (f) {
    case EmitFormat::deepspeed:
      // A ds_config runs DeepSpeed's engine: ZeRO (or stage 0 with its mixed precision).
      if (!sh.deepspeed) return no(fmt::format("a DeepSpeed config runs DeepSpeed's engine, not {}", sh.describe(s.parallel.data_parallel())));
      return true;
    case EmitFormat::hf:
      if (!none_or_full(s.checkpointing))
        return no(fmt::format("HF TrainingArguments turns gradient checkpointing on or off: no {}", to_string(s.checkpointing)));
      if (sh.fsdp != FsdpMode::none) return no("memplan's HF TrainingArguments file carries no FSDP config");
      if (s.runtime.framework != Framework::hf_trainer && s.runtime.framework != Framework::deepspeed)
        return no(fmt::format("an HF TrainingArguments file runs the HF Trainer, not --framework {}", to_string(s.runtime.framework)));
      return true;
    case EmitFormat::lightning:
      // Lightning's Trainer arguments carry precision, devices, accumulation and the strategy;
      // checkpointing is the LightningModule's (gradient_checkpointing_enable(): all or nothing).
      if (!none_or_full(s.checkpointing))
        return no(fmt::format("Lightning checkpoints every layer or none (the module's gradient_checkpointing_enable()): no {}",
                              to_string(s.checkpointing)));
      if (s.precision == Precision::mixed_bf16 && !sh.deepspeed) return no("Lightning's bf16-mixed outside DeepSpeed is autocast, not mixed-bf16");
      if (s.precision == Precision::mixed_fp16 && !sh.deepspeed) return no("Lightning's 16-mixed outside DeepSpeed is autocast, not mixed-fp16");
      return true;
    default:
      return true;
  }
}

std::vector<std::string> recheck_flags(EmitFormat f, const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  std::vector<std::string> out;
  auto target = [&] {
    if (!c.gpu.empty()) out.insert(out.end(), {"--gpu", c.gpu});
    else out.insert(out.end(), {"--gpu-memory", std::to_string(s.device.capacity_bytes)});
    out.insert(out.end(), {"--gpus", std::to_string(s.parallel.num_gpus)});
  };
  switch (f) {
    case EmitFormat::hf: target(); break;
    case EmitFormat::lightning: {
      // Lightning files name neither the model nor the sequence, and memplan reads their Trainer
      // arguments only through a LightningCLI reader: the re-check states the whole setup.
      if (c.model.kind != ModelRef::Kind::inline_spec) out.insert(out.end(), {"--model", c.model.value});
      target();
      const Sharding sh = sharding_of(s);
      out.insert(out.end(), {"--micro-batch", std::to_string(s.batch.micro_batch), "--grad-accum", std::to_string(s.batch.grad_accum),
                             "--seq-len", std::to_string(s.batch.seq_len), "--precision", to_string(s.precision), "--optimizer",
                             to_string(s.optimizer), "--checkpointing", to_string(s.checkpointing), "--attention", to_string(s.attention)});
      if (sh.fsdp != FsdpMode::none) out.insert(out.end(), {"--fsdp", to_string(sh.fsdp)});
      else out.insert(out.end(), {"--zero", std::to_string(sh.zero)});
      if (sh.offload != Offload::none) out.insert(out.end(), {"--offload", to_string(sh.offload)});
      break;
    }
    default: break;
  }
  return out;
}

}  // namespace memplan::planner
