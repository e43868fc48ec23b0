// Pieces the emitters share (internal to planner/): the header every file opens with, the
// DeepSpeed config memplan writes, and the emitters that live in their own files
// (emit_<tool>.cpp). Not part of the planner's public interface (emit.h).
#pragma once

#include <string>
#include <vector>

#include "planner/emit.h"

namespace memplan::planner::detail {

// The header lines (model, GPU, estimated peak, headroom, global batch), without comment markers.
std::vector<std::string> header_lines(const EmitContext& c);
// The DeepSpeed config memplan's deepspeed emitter writes (train batch, precision, ZeRO section),
// as JSON indented by 2, without the "memplan" block.
// `batch_auto`: the three batch keys "auto", which the HF Trainer fills from its own arguments
// (transformers src/transformers/integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_process),
// as a TrainingArguments-family file states them.
std::string deepspeed_text(const TrainingSetup& s, int64_t global_batch, bool batch_auto = false);
// Whether the DeepSpeed settings a short form cannot state differ from what it reads back as: a
// setting row of zero_optimization against `base`'s, the offload's pin_memory on, DeepSpeed's 16-bit
// master state kept (both off in every short form).
bool zero_settings_differ(const TrainingSetup& s, const TrainingSetup& base);
// "deepspeed:" and that config inline beneath it, indented (HF TrainingArguments and Axolotl take
// a dict there; JSON is YAML flow style), its batch keys "auto": the file's own batch keys say them.
std::string inline_deepspeed(const TrainingSetup& s, int64_t global_batch);
// HF's FSDP strategy word (TrainingArguments.fsdp, Axolotl's fsdp list): "full_shard", ...
const char* fsdp_word(FsdpMode m);

// target_args() (emit.h) as one string: "--gpu rtx-3090", "--gpu-memory 24GiB --allocator-cap 0.5".
std::string target_flag(const EmitContext& c);
// "memplan estimate --config FILE --gpu rtx-3090 --gpus 2 [flags]": how to re-check an emitted file
// whose format cannot hold the target (and `flags`: whatever else it cannot hold).
std::string recheck_command(const EmitContext& c, const std::string& file, const std::vector<std::string>& flags);

// HF OptimizerNames (TrainingArguments.optim; Axolotl's optimizer: takes the same names) for the
// optimizer and its kernel; `flags` gets what the name cannot say, `optim_args` its arguments.
std::string hf_optim(const TrainingSetup& s, std::vector<std::string>& flags, std::string* optim_args);
// PEFT module names for memplan's LoRA targets (q -> q_proj, ...).
std::string module_name(const std::string& t);
// PEFT's modules_to_save for what the adapters' setup trains beside them (Setting::train_embeddings,
// train_head): Llama's names, embed_tokens and lm_head, which PEFT matches by suffix (the readers take
// GPT-2's and BERT's too, profiles::detail::saved_module).
std::vector<std::string> saved_modules(const Finetune& f);

std::string emit_hf(const EmitContext& c);
std::string emit_axolotl(const EmitContext& c);
std::string emit_llamafactory(const EmitContext& c);
std::string emit_accelerate(const EmitContext& c);

}  // namespace memplan::planner::detail
