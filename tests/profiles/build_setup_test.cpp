// build_setup: the file first, flags on top, defaults, and validation problems reported at the
// flag or line they came from.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "estimator/estimate.h"
#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(MEMPLAN_TEST_DATA) + "/profiles/";

std::string render_error(const SetupInputs& in) {
  try {
    build_setup(in);
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

SetupInputs with_model(const char* model) {
  SetupInputs in;
  in.model = model;
  return in;
}

}  // namespace

TEST_CASE("flags win over the config file and become the field's origin") {
  SetupInputs in;
  in.config = kData + "ava.yaml";
  in.count_flag(Count::micro_batch) = 4;
  in.choice_flag(Choice::precision) = "bf16";
  in.gpu = "a100-80gb";
  const BuiltSetup b = build_setup(in);
  CHECK(b.config_path == kData + "ava.yaml");
  CHECK(b.setup.batch.micro_batch == 4);
  // The file runs DeepSpeed (ZeRO-1): its bf16 is DeepSpeed's mixed precision (fp32 master
  // weights and states), said in a warning at the flag.
  CHECK(b.setup.precision == Precision::mixed_bf16);
  REQUIRE_FALSE(b.warnings.empty());
  CHECK(b.warnings.back().where.flag == "--precision");
  CHECK(b.setup.device.name == "a100-80gb");
  CHECK(b.setup.batch.seq_len == 256);  // untouched fields keep the file's values
  CHECK(b.setup.parallel.zero_stage == 1);
  CHECK(b.origin.of("batch.micro_batch").flag == "--micro-batch");
  CHECK(b.origin.of("batch.seq_len").line == 37);  // data.max_length
  CHECK(b.origin.of("hardware.gpu").flag == "--gpu");
}

TEST_CASE("a flag fixes a problem in the file; a flag's own problem names the flag") {
  SetupInputs in;
  in.config = kData + "bad/zero_micro_batch.yaml";
  in.count_flag(Count::micro_batch) = 2;
  CHECK(build_setup(in).setup.batch.micro_batch == 2);
  in.count_flag(Count::micro_batch) = 0;
  CHECK(render_error(in) == "error: --micro-batch: must be at least 1 (got 0)\nhint: a size or count: a whole number of 1 or more");
  SetupInputs tp = with_model("llama-2-7b");
  tp.count_flag(Count::num_gpus) = 3;
  tp.count_flag(Count::tensor_parallel) = 3;
  CHECK(render_error(tp) == "error: --tensor-parallel: tensor parallel degree must divide the attention heads\nhint: each tensor-parallel rank holds a whole number of heads");
  SetupInputs off = with_model("gpt2");
  off.choice_flag(Choice::offload) = "optimizer";
  CHECK(render_error(off) ==
        "error: --offload: optimizer offload needs ZeRO stage 1 or higher, or FSDP\nhint: use --zero 2 --offload optimizer");
  off.count_flag(Count::zero_stage) = 2;
  CHECK(build_setup(off).setup.parallel.offload == Offload::optimizer);
}

TEST_CASE("--model replaces the file's model") {
  SetupInputs in;
  in.config = kData + "gearhead_flat.yaml";
  in.model = "gpt2";
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.model.name == "gpt2");
  CHECK(b.setup.batch.micro_batch == 2);  // the rest of the file still applies
  CHECK(b.origin.of("model.num_layers").flag == "--model");
}

TEST_CASE("defaults when nothing says otherwise") {
  const BuiltSetup b = build_setup(with_model("llama-2-7b"));
  CHECK(b.setup.precision == Precision::fp32);
  CHECK(b.setup.optimizer == OptimizerKind::adamw);
  CHECK(b.setup.batch.micro_batch == 1);
  CHECK(b.setup.batch.seq_len == 512);
  CHECK(b.setup.batch.grad_accum == 1);
  CHECK(b.setup.device.kind == DeviceKind::cuda);
  CHECK(b.setup.device.capacity_bytes == 0);
  CHECK(b.warnings.empty());
  // A model with fewer positions than 512 defaults to its own length.
  CHECK(build_setup(with_model((kData + "models/tiny-llama").c_str())).setup.batch.seq_len == 256);
  SetupInputs explicit_len = with_model((kData + "models/tiny-llama").c_str());
  explicit_len.count_flag(Count::seq_len) = 400;
  CHECK(build_setup(explicit_len).setup.batch.seq_len == 400);
}

TEST_CASE("no model anywhere is an error with the ways to give one") {
  CHECK(render_error(SetupInputs{}) ==
        "error: no model given\nhint: pass --model PRESET|config.json or set model: in the config (memplan models "
        "lists the presets)");
  SetupInputs ds;
  ds.config = kData + "ds_config.json";
  CHECK(render_error(ds).rfind("error: no model given", 0) == 0);
  ds.model = "gpt2";
  CHECK(build_setup(ds).setup.parallel.zero_stage == 2);
}

TEST_CASE("device flags: --gpu, --gpu-memory, --device") {
  SetupInputs in = with_model("gpt2");
  in.gpu = "rtx-3090ti";
  CHECK(render_error(in) ==
        "error: --gpu: unknown GPU 'rtx-3090ti'\nhint: did you mean 'rtx-3090-ti'? (memplan gpus lists the presets)");
  in.gpu = "RTX 3090";
  CHECK(build_setup(in).setup.device.capacity_bytes == 25'414'860'800);
  in.size_flag(Size::gpu_memory) = "20GiB";  // overrides the preset's capacity, keeps its family
  DeviceSpec d = build_setup(in).setup.device;
  CHECK(d.capacity_bytes == 20LL << 30);
  CHECK(d.family == "ampere");
  in.gpu.reset();
  in.size_flag(Size::gpu_memory) = "12 gigs";
  CHECK(render_error(in) ==
        "error: --gpu-memory: cannot read '12 gigs' as a size\nhint: write it like 12GiB or 24GB");
  in.size_flag(Size::gpu_memory) = "12GiB";
  d = build_setup(in).setup.device;
  CHECK(d.capacity_bytes == 12LL << 30);
  CHECK(d.family == "generic");
  CHECK(d.cuda_context_bytes == 536'870'912);
  CHECK(d.cublas_workspace_bytes == 8'519'680);

  SetupInputs cpu = with_model("gpt2");
  cpu.device = "cpu";
  BuiltSetup b = build_setup(cpu);
  CHECK(b.setup.device.kind == DeviceKind::cpu);
  CHECK(b.setup.device.name == "cpu");
  CHECK(b.setup.device.capacity_bytes > (1LL << 28));  // host RAM from /proc/meminfo
  CHECK(b.setup.device.cuda_context_bytes == 0);
  CHECK_FALSE(b.setup.runtime.allocator_rounding);
  cpu.size_flag(Size::gpu_memory) = "8GiB";
  CHECK(build_setup(cpu).setup.device.capacity_bytes == 8LL << 30);
  cpu.device = "cuda:1";
  CHECK(build_setup(cpu).setup.device.kind == DeviceKind::cuda);
  cpu.device = "tpu";
  CHECK(render_error(cpu) == "error: --device: unknown device 'tpu'\nhint: expected one of: cpu, cuda, cuda:N");
}

TEST_CASE("enumerated flags list the accepted values") {
  SetupInputs in = with_model("gpt2");
  in.choice_flag(Choice::precision) = "fp8";
  CHECK(render_error(in) ==
        "error: --precision: unknown precision 'fp8'\nhint: expected one of: fp32, amp-fp16, amp-bf16, bf16, fp16, "
        "mixed-fp16, mixed-bf16");
  in.choice_flag(Choice::precision) = "amp_bf16";
  in.choice_flag(Choice::checkpointing) = "every:0";
  CHECK(render_error(in) ==
        "error: --checkpointing: unknown checkpointing 'every:0'\nhint: expected one of: none, full, selective, selective-op, every:K, layers:I,J,...");
  in.choice_flag(Choice::checkpointing) = "every:4";
  in.choice_flag(Choice::attention) = "sdpa";
  in.choice_flag(Choice::optimizer) = "adamw_8bit";
  const TrainingSetup s = build_setup(in).setup;
  CHECK(s.precision == Precision::amp_bf16);
  CHECK(s.checkpointing.mode == CheckpointMode::every);
  CHECK(s.checkpointing.every_k == 4);
  CHECK(s.attention == AttentionImpl::sdpa);
  CHECK(s.optimizer == OptimizerKind::adamw_8bit);
}

TEST_CASE("fine-tuning flags") {
  SetupInputs in = with_model("llama-2-7b");
  in.choice_flag(Choice::finetune) = "qlora";
  in.count_flag(Count::lora_rank) = 64;
  in.list_flag(List::lora_targets) = "q, k,v ,o";
  TrainingSetup s = build_setup(in).setup;
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.base_quant == BaseQuant::nf4);
  CHECK(s.finetune.lora_rank == 64);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "k", "v", "o"});
  in.choice_flag(Choice::finetune) = "lora";
  CHECK(build_setup(in).setup.finetune.base_quant == BaseQuant::none);
  in.count_flag(Count::lora_rank) = 0;
  CHECK(render_error(in) == "error: --lora-rank: must be between 1 and 100000 (got 0)\nhint: PEFT's r, usually 8 to 64");
}

TEST_CASE("config warnings and --calibration reach the BuiltSetup") {
  SetupInputs in;
  in.config = kData + "bad/near_miss.yaml";
  in.calibration = kData + "calibration.yaml";
  const BuiltSetup b = build_setup(in);
  CHECK(b.warnings.size() == 2);
  REQUIRE(b.calibration.has_value());
  CHECK(b.calibration->device == "rtx-3090");
  CHECK(b.calibration->file == kData + "calibration.yaml");
}

TEST_CASE("a model loaded in bfloat16 under DeepSpeed is DeepSpeed's mixed precision: fp32 master weights and states") {
  // TRL/HF style: torch_dtype bfloat16 and a ZeRO stage. DeepSpeed's ZeRO optimizers build fp32
  // partitions from the 16-bit parameters whatever dtype the model was loaded in.
  const fs::path dir = fs::temp_directory_path() / ("memplan-dsdtype-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "sft.yaml").string();
  std::ofstream(path) << "model_name_or_path: gpt2\ntorch_dtype: bfloat16\nper_device_train_batch_size: 2\n"
                         "deepspeed:\n  zero_optimization:\n    stage: 3\n";
  SetupInputs in;
  in.config = path;
  in.gpu = "a100-80gb";
  in.count_flag(Count::num_gpus) = 8;
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.parallel.zero_stage == 3);
  CHECK(b.setup.precision == Precision::mixed_bf16);
  const MemoryBreakdown e = estimate(b.setup);
  CHECK(e.peak()[Term::master_weights] > 0);
  // Without DeepSpeed the same file is pure bf16: no master copy.
  std::ofstream(path) << "model_name_or_path: gpt2\ntorch_dtype: bfloat16\nper_device_train_batch_size: 2\n";
  const BuiltSetup plain = build_setup(in);
  CHECK(plain.setup.precision == Precision::bf16);
  // A pure-bf16 flag under a ZeRO stage is read the same way, with a warning at the flag.
  SetupInputs flag;
  flag.model = "gpt2";
  flag.gpu = "a100-80gb";
  flag.count_flag(Count::num_gpus) = 8;
  flag.count_flag(Count::zero_stage) = 2;
  flag.choice_flag(Choice::precision) = "bf16";
  const BuiltSetup f = build_setup(flag);
  CHECK(f.setup.precision == Precision::mixed_bf16);
  REQUIRE_FALSE(f.warnings.empty());
  CHECK(f.warnings.back().where.flag == "--precision");
  fs::remove_all(dir);
}

TEST_CASE("allocator cap: hardware.allocator_cap and --allocator-cap, a size or a fraction of the card") {
  const std::string path = "/tmp/memplan-allocator-cap.yaml";
  const LoadedConfig cfg =
      load_config_text("model: gpt2\nhardware:\n  gpu: h200\n  allocator_cap: 11GiB\n", path, path);
  CHECK(cfg.allocator_cap == std::optional<std::string>("11GiB"));
  SetupInputs in;
  BuiltSetup b = build_setup(in, cfg);
  CHECK(b.setup.device.allocator_cap_bytes == 11LL << 30);
  // The process can use the cap plus the context outside the allocator (the card's, if less).
  CHECK(b.setup.device.capacity_bytes == (11LL << 30) + b.setup.device.cuda_context_bytes);
  CHECK(b.origin.of("hardware.allocator_cap").str().rfind(path + ":4:", 0) == 0);
  // The flag wins; a fraction is of the card's memory, as set_per_process_memory_fraction takes it.
  in.size_flag(Size::allocator_cap) = "0.5";
  b = build_setup(in, cfg);
  CHECK(b.setup.device.allocator_cap_bytes == 150'109'880'320 / 2);
  // A cap over the card leaves the card's memory.
  in.size_flag(Size::allocator_cap) = "1TiB";
  b = build_setup(in, cfg);
  CHECK(b.setup.device.capacity_bytes == 150'109'880'320);
  const LoadedConfig bad = load_config_text("model: gpt2\nhardware:\n  gpu: h200\n  allocator_cap: lots\n", path, path);
  try {
    build_setup(SetupInputs{}, bad);
    FAIL("a bad allocator cap was accepted");
  } catch (const InputError& e) {
    CHECK(e.render().rfind(path + ":4:", 0) == 0);
    CHECK(e.render().find("cannot read 'lots' as an allocator cap") != std::string::npos);
  }
}

TEST_CASE("framework defaults of issue 23: the compiled loss, FSDP1 no_sync, the adapters' dtype; flags override each") {
  auto with = [](const char* framework, bool compile, const char* loss) {
    SetupInputs in = with_model("llama-2-7b");
    in.choice_flag(Choice::framework) = framework;
    in.switch_flag(Switch::compile) = compile;
    in.choice_flag(Choice::loss) = loss;
    in.choice_flag(Choice::finetune) = "lora";
    return build_setup(in).setup;
  };
  // torchtune compiles its chunked loss in place and nothing else (its recipes drop compile_loss's
  // return value); torchtitan and the HF Trainer compile the loss with the model.
  CHECK(with("torchtune", true, "chunked:8").runtime.compile_loss);
  CHECK(with("torchtune", true, "standard").runtime.compile_loss);  // the LoRA recipes keep the compiled loss
  {
    SetupInputs full = with_model("llama-2-7b");
    full.choice_flag(Choice::framework) = "torchtune";
    full.switch_flag(Switch::compile) = true;
    full.choice_flag(Choice::loss) = "standard";
    CHECK_FALSE(build_setup(full).setup.runtime.compile_loss);  // the full recipes drop it
  }
  CHECK_FALSE(with("torchtune", false, "chunked:8").runtime.compile_loss);
  CHECK(with("torchtitan", true, "standard").runtime.compile_loss);
  CHECK(with("hf-trainer", true, "standard").runtime.compile_loss);
  CHECK_FALSE(with("litgpt", true, "chunked:128t").runtime.compile_loss);
  // Adapters in the model's dtype under torchtune and LitGPT; PEFT's fp32 elsewhere.
  CHECK_FALSE(with("torchtune", false, "chunked:8").finetune.adapter_fp32);
  CHECK_FALSE(with("litgpt", false, "chunked:128t").finetune.adapter_fp32);
  CHECK(with("hf-trainer", false, "standard").finetune.adapter_fp32);
  // no_sync: LitGPT, Lightning and the HF Trainer; not the FSDP2 frameworks.
  CHECK(with("litgpt", false, "chunked:128t").runtime.fsdp_no_sync);
  CHECK(with("hf-trainer", false, "standard").runtime.fsdp_no_sync);
  CHECK(with("lightning", false, "standard").runtime.fsdp_no_sync);
  CHECK_FALSE(with("torchtune", false, "chunked:8").runtime.fsdp_no_sync);
  CHECK_FALSE(with("torchtitan", false, "standard").runtime.fsdp_no_sync);
  // Each can be set on its own.
  SetupInputs in = with_model("llama-2-7b");
  in.choice_flag(Choice::framework) = "torchtune";
  in.choice_flag(Choice::finetune) = "lora";
  in.switch_flag(Switch::compile) = true;
  in.switch_flag(Switch::compile_loss) = false;
  in.choice_flag(Choice::adapter_dtype) = "fp32";
  in.switch_flag(Switch::fsdp_no_sync) = true;
  const BuiltSetup b = build_setup(in);
  CHECK_FALSE(b.setup.runtime.compile_loss);
  CHECK(b.setup.finetune.adapter_fp32);
  CHECK(b.setup.runtime.fsdp_no_sync);
  CHECK(b.origin.of("finetune.adapter_dtype").flag == "--adapter-dtype");
  in.choice_flag(Choice::adapter_dtype) = "fp8";
  try {
    build_setup(in);
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(e.render() == "error: --adapter-dtype: unknown adapter dtype 'fp8'\n"
                       "hint: expected fp32 (PEFT's upcast adapters) or model (the model's dtype: torchtune, LitGPT)");
  }
}

// DeepSpeed derives the batch from train_batch_size (deepspeed/runtime/config.py
// _set_batch_related_parameters / _batch_assertion): real DeepSpeedExamples configs
// (tests/data/formats/deepspeed/SOURCES.txt). memplan ignored the key before: micro-batch 1 (its
// default) where DeepSpeed runs 16 per GPU on one GPU.
TEST_CASE("DeepSpeed train_batch_size sets the micro-batch or the accumulation, and must agree with both") {
  const std::string dir = std::string(MEMPLAN_TEST_DATA) + "/formats/deepspeed/";
  SetupInputs megatron = with_model("gpt2");
  megatron.config = dir + "megatron-ds_zero2_config.json";  // train_batch_size 16, gradient_accumulation_steps 1
  BuiltSetup b = build_setup(megatron);
  CHECK(b.setup.batch.micro_batch == 16);
  CHECK(b.setup.batch.grad_accum == 1);
  CHECK(b.origin.defaults.at("batch.micro_batch").find("train_batch_size 16 / (accumulation 1 x 1 data-parallel rank)") == 0);
  megatron.count_flag(Count::num_gpus) = 4;  // 16 / (1 x 4)
  CHECK(build_setup(megatron).setup.batch.micro_batch == 4);
  megatron.count_flag(Count::micro_batch) = 2;  // with the file's accumulation 1: 2 x 1 x 4 = 8, not 16
  CHECK(render_error(megatron) ==
        dir + "megatron-ds_zero2_config.json:2:3: error: train_batch_size 16 is not micro-batch 2 x accumulation 1 x 4 "
              "data-parallel ranks = 8\nhint: DeepSpeed asserts train_batch_size == train_micro_batch_size_per_gpu x "
              "gradient_accumulation_steps x data-parallel ranks: change one of them, or drop train_batch_size");
  SetupInputs cifar = with_model("gpt2");
  cifar.config = dir + "cifar-ds_config.json";  // train_batch_size 4 alone: accumulation 1, 4 / ranks per GPU
  b = build_setup(cifar);
  CHECK(b.setup.batch.micro_batch == 4);
  CHECK(b.setup.batch.grad_accum == 1);
  cifar.count_flag(Count::micro_batch) = 2;  // a micro-batch given: accumulation 4 / (2 x 1)
  b = build_setup(cifar);
  CHECK(b.setup.batch.grad_accum == 2);
  CHECK(b.origin.defaults.at("batch.grad_accum").find("train_batch_size 4 / (micro-batch 2 x 1 data-parallel rank)") == 0);
  cifar.count_flag(Count::micro_batch) = 3;
  CHECK(render_error(cifar) ==
        dir + "cifar-ds_config.json:2:3: error: train_batch_size 4 is not a multiple of micro-batch 3 x 1 data-parallel "
              "rank\nhint: DeepSpeed asserts train_batch_size == train_micro_batch_size_per_gpu x gradient_accumulation_steps "
              "x data-parallel ranks: change one of them, or drop train_batch_size");
  cifar.count_flag(Count::micro_batch).reset();
  cifar.count_flag(Count::num_gpus) = 8;  // 4 sequences cannot be shared by 8 ranks
  CHECK(render_error(cifar).find("error: train_batch_size 4 is not a multiple of accumulation 1 x 8 data-parallel ranks") != std::string::npos);
}

// Issue 26: DeepSpeed's AutoTP training (tensor_parallel.autotp_size) was "not modelled" although
// --tensor-parallel is: the config of https://www.deepspeed.ai/tutorials/autotp-training/.
TEST_CASE("DeepSpeed tensor_parallel.autotp_size is the tensor-parallel degree; with ZeRO-3 it is refused") {
  const std::string dir = std::string(MEMPLAN_TEST_DATA) + "/formats/deepspeed/";
  SetupInputs in = with_model("llama-3.1-8b");
  in.config = dir + "autotp-training.json";
  in.count_flag(Count::num_gpus) = 8;
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.parallel.tensor_parallel == 4);
  CHECK(b.setup.parallel.data_parallel() == 2);
  CHECK(b.setup.parallel.zero_stage == 2);
  CHECK(b.origin.fields.count("parallel.tensor_parallel") == 1);
  for (const Warning& w : b.warnings) CHECK(w.message.find("tensor_parallel") == std::string::npos);
  // The same inside an HF TrainingArguments file's deepspeed: dict.
  const fs::path tmp = fs::temp_directory_path() / ("memplan-autotp-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  const std::string hf = (tmp / "args.yaml").string();
  std::ofstream(hf) << "model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 1\nbf16: true\n"
                       "deepspeed:\n  zero_optimization: {stage: 1}\n  tensor_parallel: {autotp_size: 2, tp_overlap_comm: true}\n";
  SetupInputs h = with_model("llama-3.1-8b");
  h.config = hf;
  h.count_flag(Count::num_gpus) = 4;
  CHECK(build_setup(h).setup.parallel.tensor_parallel == 2);
  // ZeRO-3 with AutoTP, and a key AutoTP does not read.
  std::ofstream(tmp / "z3.json") << "{\"zero_optimization\": {\"stage\": 3},\n \"tensor_parallel\": {\"autotp_size\": 2}}\n";
  SetupInputs z = with_model("llama-3.1-8b");
  z.config = (tmp / "z3.json").string();
  z.count_flag(Count::num_gpus) = 4;
  CHECK(render_error(z) == z.config.value() + ":2:22: error: tensor_parallel.autotp_size with ZeRO stage 3: DeepSpeed's AutoTP training "
                                              "runs with ZeRO 0, 1 or 2\nhint: use zero_optimization.stage 2 (or 1) with autotp_size, or "
                                              "drop tensor_parallel for ZeRO-3 (https://www.deepspeed.ai/tutorials/autotp-training/)");
  std::ofstream(tmp / "odd.json") << "{\"zero_optimization\": {\"stage\": 1}, \"tensor_parallel\": {\"autotp_size\": 2, \"tp_size\": 2}}\n";
  z.config = (tmp / "odd.json").string();
  bool warned = false;
  for (const Warning& w : build_setup(z).warnings) warned = warned || w.message == "tensor_parallel.tp_size is not an AutoTP training key memplan knows";
  CHECK(warned);
  fs::remove_all(tmp);
}

TEST_CASE("the job's Python's releases (SetupInputs::environment) stand below the config and the flags") {
  auto env = [](const char* torch, const char* transformers) {
    SetupInputs in = with_model("gpt2");
    in.environment[static_cast<size_t>(Version::torch)] = SetupInputs::EnvironmentRelease{torch, "installed for /venv/bin/python3: torch"};
    in.environment[static_cast<size_t>(Version::transformers)] =
        SetupInputs::EnvironmentRelease{transformers, "installed for /venv/bin/python3: transformers"};
    return in;
  };
  const BuiltSetup none = build_setup(with_model("gpt2"));
  CHECK(none.setup.runtime.torch_major == 2);
  CHECK(none.setup.runtime.torch_minor == 11);
  CHECK(none.setup.runtime.transformers_major == 5);
  CHECK(none.setup.runtime.transformers_minor == 17);

  const BuiltSetup found = build_setup(env("1.13.0a0", "4.57.1"));
  CHECK(found.setup.runtime.torch_minor == 13);
  CHECK(found.setup.runtime.transformers_minor == 57);
  CHECK_FALSE(found.setup.runtime.zero_grad_set_to_none);  // torch 1.x's zero_grad keeps the gradients
  CHECK(found.origin.defaults.at("runtime.torch_version") == "installed for /venv/bin/python3: torch");
  CHECK(found.origin.fields.count("runtime.torch_version") == 0);

  SetupInputs flagged = env("2.11.0+cu130", "5.2.0.dev0");
  flagged.version_flag(Version::torch) = "2.6";
  const BuiltSetup f = build_setup(flagged);
  CHECK(f.setup.runtime.torch_minor == 6);  // the flag wins
  CHECK(f.setup.runtime.transformers_major == 5);
  CHECK(f.setup.runtime.transformers_minor == 2);

  // What memplan does not read as a release leaves the default, and says what was found.
  const BuiltSetup odd = build_setup(env("10.0.0", "main"));
  CHECK(odd.setup.runtime.torch_minor == 11);
  CHECK(odd.origin.defaults.at("runtime.torch_version").find("(10.0.0, a release memplan does not read)") != std::string::npos);
  CHECK(odd.setup.runtime.transformers_minor == 17);
  // Nothing found: the default, and why.
  SetupInputs missing = with_model("gpt2");
  missing.environment[static_cast<size_t>(Version::torch)] = SetupInputs::EnvironmentRelease{"", "no python3 on PATH"};
  const BuiltSetup m = build_setup(missing);
  CHECK(m.origin.defaults.at("runtime.torch_version") == "memplan's default release, torch 2.11 (estimator/setup.h Runtime); no python3 on PATH");
}

TEST_CASE("LoRA targets that match no layer are refused, as PEFT refuses them, with the layers the model has") {
  SetupInputs in = with_model("gpt2");
  in.choice_flag(Choice::finetune) = "lora";
  in.list_flag(List::lora_targets) = "foo";
  CHECK(render_error(in) ==
        "error: --lora-targets: the LoRA targets (foo) match no linear layer of gpt2\nhint: PEFT refuses it (target modules not found "
        "in the base model); this model's layers have: qkv, o, fc_in, down (or all-linear)");
  in.list_flag(List::lora_targets) = "foo,all-linear";
  CHECK(render_error(in).empty());
  SetupInputs llama = with_model("llama-3.2-1b");
  llama.choice_flag(Choice::finetune) = "qlora";
  llama.list_flag(List::lora_targets) = "q_proj,v_proj";
  CHECK(render_error(llama).empty());
  // GPT-2 has one fused c_attn: no module is named q_proj or v_proj, so PEFT finds none of them;
  // its own name, and memplan's q and v, are taken.
  in.list_flag(List::lora_targets) = "q_proj,v_proj";
  CHECK(render_error(in).find("the LoRA targets (q_proj, v_proj) match no linear layer of gpt2") != std::string::npos);
  for (const char* ok : {"c_attn", "q,v"}) {
    CAPTURE(ok);
    in.list_flag(List::lora_targets) = ok;
    CHECK(render_error(in).empty());
  }
}
