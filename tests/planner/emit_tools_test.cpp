// Round trips of the torchtune, LitGPT and Lightning emitters (planner/emit_<tool>.cpp): a plan
// made for the tool (its runtime, its model), emitted, read back by memplan's reader of that
// format with only the flags the file's header names, gives the same setup and the same peak.
// Also what each tool cannot express, refused at --emit.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "estimator/estimate.h"
#include "planner/emit.h"
#include "planner/plan.h"
#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::planner;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "memplan-emit-tools-test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

struct Case {
  const char* name;
  const char* format;
  profiles::SetupInputs in;  // model, gpu, gpus, fine-tuning ... as `memplan plan` flags
  int64_t global_batch;
};

// What `memplan plan --emit FORMAT` does (planner/request.cpp): the tool's framework and model.
struct Planned {
  PlanResult result;
  EmitContext context;
  EmitFormat format;
};

Planned plan_for(const Case& c) {
  Planned p;
  REQUIRE(parse_emit_format(c.format, &p.format));
  profiles::SetupInputs in = c.in;
  in.choice_flag(Choice::framework) = to_string(*emit_framework(p.format));
  profiles::BuiltSetup b = profiles::build_setup(in);
  if (p.format != EmitFormat::lightning) {
    const auto t = profiles::tool_model(b.setup.model, c.format);
    REQUIRE(t.has_value());
    b.setup.model = t->spec;
    p.context.tool = {t->name, t->tokenizer, t->checkpointer_type};
  }
  PlanAsk ask;
  ask.global_batch = c.global_batch;
  ask.emit = c.format;
  ask.precision_fixed = in.choice_flag(Choice::precision).has_value();
  ask.checkpointing_fixed = in.choice_flag(Choice::checkpointing).has_value();
  ask.optimizer_fixed = in.choice_flag(Choice::optimizer).has_value();
  const PlanRequest req = make_request(b.setup, ask, nullptr);
  p.result = plan(req);
  REQUIRE(p.result.found);
  p.context.setup = p.result.best.setup;
  p.context.model = {ModelRef::Kind::preset, *c.in.model};
  p.context.gpu = *c.in.gpu;
  p.context.global_batch = p.result.best.global_batch;
  p.context.budget = req.budget;
  p.context.peak_bytes = p.result.best.peak_bytes;
  return p;
}

void check_same(const TrainingSetup& s, const TrainingSetup& w) {
  CHECK(s.model.name == w.model.name);
  CHECK(s.model.hidden_size == w.model.hidden_size);
  CHECK(s.model.num_layers == w.model.num_layers);
  CHECK(s.model.vocab_size == w.model.vocab_size);
  CHECK(s.model.tie_word_embeddings == w.model.tie_word_embeddings);
  CHECK(s.batch.micro_batch == w.batch.micro_batch);
  CHECK(s.batch.grad_accum == w.batch.grad_accum);
  CHECK(s.batch.seq_len == w.batch.seq_len);
  CHECK(s.precision == w.precision);
  CHECK(s.optimizer == w.optimizer);
  CHECK(to_string(s.checkpointing) == to_string(w.checkpointing));
  CHECK(s.attention == w.attention);
  CHECK(s.parallel.num_gpus == w.parallel.num_gpus);
  CHECK(s.parallel.zero_stage == w.parallel.zero_stage);
  CHECK(s.parallel.offload == w.parallel.offload);
  CHECK(s.parallel.fsdp == w.parallel.fsdp);
  CHECK(s.parallel.reduce_bucket_elems == w.parallel.reduce_bucket_elems);
  CHECK(s.parallel.overlap_comm == w.parallel.overlap_comm);
  CHECK(s.finetune.mode == w.finetune.mode);
  CHECK(s.finetune.base_quant == w.finetune.base_quant);
  if (w.finetune.mode != FinetuneMode::full) {
    CHECK(s.finetune.lora_rank == w.finetune.lora_rank);
    CHECK(s.finetune.lora_alpha == w.finetune.lora_alpha);
    CHECK(s.finetune.lora_dropout == w.finetune.lora_dropout);
  }
  CHECK(s.runtime.framework == w.runtime.framework);
  CHECK(to_string(s.runtime, s.runtime.loss) == to_string(w.runtime, w.runtime.loss));
  CHECK(s.runtime.loss_upcast == w.runtime.loss_upcast);
  CHECK(s.runtime.keep_logits == w.runtime.keep_logits);
  CHECK(s.runtime.optimizer_impl == w.runtime.optimizer_impl);
  CHECK(s.runtime.zero_grad_after_forward == w.runtime.zero_grad_after_forward);
  CHECK(s.device.name == w.device.name);
}

profiles::SetupInputs inputs(const char* model, const char* gpu, int64_t gpus, int64_t seq) {
  profiles::SetupInputs in;
  in.model = model;
  in.gpu = gpu;
  in.count_flag(Count::num_gpus) = gpus;
  in.count_flag(Count::seq_len) = seq;
  return in;
}

}  // namespace

TEST_CASE("emitted torchtune, LitGPT and Lightning configs read back to the plan's setup and peak") {
  std::vector<Case> cases;
  cases.push_back({"torchtune full, 1 GPU", "torchtune", inputs("llama-3.2-1b", "rtx-4090", 1, 1024), 16});
  cases.push_back({"torchtune full, FSDP over 4", "torchtune", inputs("llama-3.2-3b", "a100-40gb", 4, 2048), 64});
  {
    profiles::SetupInputs in = inputs("llama-3.1-8b", "rtx-4090", 1, 1024);
    in.choice_flag(Choice::finetune) = "qlora";
    in.count_flag(Count::lora_rank) = 16;
    in.list_flag(List::lora_targets) = "q,k,v,o,gate,up,down";
    cases.push_back({"torchtune QLoRA", "torchtune", in, 16});
  }
  {
    profiles::SetupInputs in = inputs("qwen2.5-7b", "a100-80gb", 2, 4096);
    in.choice_flag(Choice::finetune) = "lora";
    in.count_flag(Count::lora_rank) = 32;
    in.number_flag(Number::lora_alpha) = 64;
    in.list_flag(List::lora_targets) = "q,v";
    in.choice_flag(Choice::optimizer_impl) = "fused";
    in.switch_flag(Switch::compile) = true;
    cases.push_back({"torchtune LoRA, 2 GPUs, fused AdamW, compile", "torchtune", in, 32});
  }
  {
    profiles::SetupInputs in = inputs("llama-3.1-8b", "a10g", 8, 2048);
    in.choice_flag(Choice::checkpointing) = "full";
    in.switch_flag(Switch::activation_offload) = true;
    in.choice_flag(Choice::loss) = "fused-linear";
    cases.push_back({"torchtune full, offloaded activations, fused linear loss", "torchtune", in, 64});
  }
  cases.push_back({"LitGPT full, 1 GPU", "litgpt", inputs("llama-3.2-1b", "a100-80gb", 1, 1024), 16});
  cases.push_back({"LitGPT full, 4 GPUs", "litgpt", inputs("llama-3.1-8b", "a100-80gb", 4, 2048), 64});
  {
    profiles::SetupInputs in = inputs("phi-3-mini", "a10g", 1, 512);
    in.choice_flag(Choice::finetune) = "lora";
    in.count_flag(Count::lora_rank) = 8;
    in.number_flag(Number::lora_alpha) = 16;
    in.number_flag(Number::lora_dropout) = 0.05;
    in.list_flag(List::lora_targets) = "q,k,v,o";
    cases.push_back({"LitGPT LoRA", "litgpt", in, 8});
  }
  {
    profiles::SetupInputs in = inputs("llama-3.1-8b", "a10g", 1, 512);
    in.choice_flag(Choice::finetune) = "qlora";
    in.count_flag(Count::lora_rank) = 32;
    cases.push_back({"LitGPT QLoRA", "litgpt", in, 8});
  }
  cases.push_back({"Lightning, 1 GPU", "lightning", inputs("llama-3.2-1b", "rtx-3090", 1, 1024), 8});
  cases.push_back({"Lightning, DeepSpeed over 4", "lightning", inputs("llama-3.1-8b", "a100-40gb", 4, 2048), 256});
  {
    profiles::SetupInputs in = inputs("llama-3.2-3b", "a100-80gb", 16, 2048);
    in.choice_flag(Choice::fsdp) = "full";
    in.choice_flag(Choice::precision) = "amp-bf16";
    cases.push_back({"Lightning, FSDP over 2 nodes", "lightning", in, 128});
  }
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const Planned p = plan_for(c);
    const std::string text = emit(p.context, p.format);
    const std::string path = write_temp(std::string(c.format) + "-" + std::to_string(&c - cases.data()) + ".yaml", text);
    profiles::SetupInputs back;
    back.config = path;
    // The file reads without a warning (deferred ones answered by the flags below), except
    // LitGPT's quantized lm_head, which memplan keeps in 16 bits and says so.
    const bool quantized_lm_head = p.format == EmitFormat::litgpt && p.context.setup.finetune.base_quant != BaseQuant::none;
    back.strict = !quantized_lm_head;
    // Only what the header says the format cannot hold.
    if (p.format == EmitFormat::torchtune) {
      back.gpu = p.context.gpu;
      back.count_flag(Count::num_gpus) = p.context.setup.parallel.num_gpus;
    }
    if (p.format == EmitFormat::litgpt) back.gpu = p.context.gpu;
    const profiles::BuiltSetup b = profiles::build_setup(back);
    CHECK(b.config_format == c.format);
    check_same(b.setup, p.context.setup);
    const MemoryBreakdown e = estimate(b.setup);
    CHECK(e.peak_bytes() == p.result.best.peak_bytes);
  }
}

TEST_CASE("emitted files say what the tool needs, in its own words") {
  profiles::SetupInputs in = inputs("llama-3.1-8b", "rtx-4090", 1, 1024);
  in.choice_flag(Choice::finetune) = "qlora";
  in.list_flag(List::lora_targets) = "q,v";
  const Planned tt = plan_for({"", "torchtune", in, 16});
  const std::string t = emit(tt.context, EmitFormat::torchtune);
  CHECK(t.find("  _component_: torchtune.models.llama3_1.qlora_llama3_1_8b\n") != std::string::npos);
  CHECK(t.find("  lora_attn_modules: ['q_proj', 'v_proj']\n  apply_lora_to_mlp: False\n") != std::string::npos);
  CHECK(t.find("# tune run lora_finetune_single_device --config this-file\n") != std::string::npos);
  CHECK(t.find("  _component_: torchtune.models.llama3.llama3_tokenizer\n") != std::string::npos);
  CHECK(t.find("dtype: bf16\n") != std::string::npos);
  const Planned lit = plan_for({"", "litgpt", in, 16});
  const std::string l = emit(lit.context, EmitFormat::litgpt);
  CHECK(l.find("checkpoint_dir: checkpoints/meta-llama/Meta-Llama-3.1-8B\n") != std::string::npos);
  CHECK(l.find("quantize: bnb.nf4-dq\n") != std::string::npos);
  CHECK(l.find("precision: bf16-true\n") != std::string::npos);
  CHECK(l.find("  class_path: bitsandbytes.optim.PagedAdamW\n") != std::string::npos);
  // LitGPT trains its own variant of the model: untied, the padded vocabulary.
  CHECK_FALSE(lit.context.setup.model.tie_word_embeddings);
  const Planned pl = plan_for({"", "lightning", inputs("llama-3.1-8b", "a100-40gb", 16, 2048), 256});
  const std::string g = emit(pl.context, EmitFormat::lightning);
  CHECK(g.find("  devices: 8\n  num_nodes: 2\n") != std::string::npos);
  CHECK(g.find("# --- memplan setup") != std::string::npos);
  CHECK(g.find("#   preset: llama-3.1-8b\n") != std::string::npos);
  CHECK(g.find("class_path: lightning.pytorch.strategies.DeepSpeedStrategy") != std::string::npos);
}

TEST_CASE("what a tool cannot express is refused at --emit") {
  auto message = [](const EmitContext& c, EmitFormat f) {
    try {
      emit(c, f);
    } catch (const InputError& e) {
      return e.render();
    }
    return std::string();
  };
  profiles::SetupInputs in = inputs("llama-3.2-1b", "a100-40gb", 4, 1024);
  const Planned p = plan_for({"", "torchtune", in, 64});
  EmitContext c = p.context;
  c.setup.parallel.zero_stage = 2;
  c.setup.parallel.fsdp = FsdpMode::none;
  CHECK(message(c, EmitFormat::torchtune) == "error: --emit: torchtune cannot run this plan: DeepSpeed ZeRO-2: torchtune shards with "
                                             "FSDP2\nhint: plan without ZeRO");
  c = p.context;
  c.setup.precision = Precision::amp_bf16;
  CHECK(message(c, EmitFormat::torchtune).find("precision amp-bf16: torchtune trains in dtype bf16 or fp32") != std::string::npos);
  c = p.context;
  c.setup.finetune.mode = FinetuneMode::lora;
  c.setup.finetune.lora_targets = {"q", "gate"};
  CHECK(message(c, EmitFormat::torchtune).find("LoRA on part of the MLP") != std::string::npos);
  c = p.context;
  c.tool = {};
  CHECK(message(c, EmitFormat::torchtune).find("torchtune has no builder for llama-3.2-1b") != std::string::npos);
  const Planned l = plan_for({"", "litgpt", in, 64});
  c = l.context;
  c.setup.checkpointing.mode = CheckpointMode::none;
  CHECK(message(c, EmitFormat::litgpt) ==
        "error: --emit: LitGPT cannot run this plan: checkpointing none on 4 device(s): LitGPT's scripts checkpoint every Block "
        "on several devices and nothing on one\nhint: plan with --checkpointing full");
  c = l.context;
  c.setup.precision = Precision::mixed_bf16;
  CHECK(message(c, EmitFormat::litgpt).find("precision mixed-bf16") != std::string::npos);
  const Planned g = plan_for({"", "lightning", in, 64});
  c = g.context;
  c.setup.parallel.zero_stage = 3;
  c.setup.precision = Precision::bf16;
  CHECK(message(c, EmitFormat::lightning).find("Lightning's DeepSpeed strategy keeps fp32 master weights") != std::string::npos);
  // A model torchtune has no builder for: the CLI asks profiles::tool_model and finds none.
  CHECK_FALSE(profiles::tool_model(profiles::load_model("gpt2", Where()), "torchtune").has_value());
  CHECK_FALSE(profiles::tool_model(profiles::load_model("mixtral-8x7b", Where()), "torchtune").has_value());
  CHECK(profiles::tool_model(profiles::load_model("mixtral-8x7b", Where()), "litgpt")->name == "checkpoints/mistralai/Mixtral-8x7B-v0.1");
}
