// Internal to calibrate/: LibTorch version shims (1.13 CPU from Debian, 2.x CUDA wheels), the
// autocast guard, and the decoder model's interface between decoder.cpp and measure.cpp.
// Facts behind the shims: docs/libtorch-notes.md §3, §4, §5, §7.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>
#include <ATen/autocast_mode.h>

#include <memory>
#include <string>

#include "estimator/setup.h"

#define MEMPLAN_TORCH_AT_LEAST(MA, MI) \
  (TORCH_VERSION_MAJOR > (MA) || (TORCH_VERSION_MAJOR == (MA) && TORCH_VERSION_MINOR >= (MI)))

namespace memplan::calibrate {

// `with torch.autocast(device, dtype):` for both API generations (docs/libtorch-notes.md §7).
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType d, c10::ScalarType dt);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  static bool enabled(c10::DeviceType d);
  static c10::ScalarType dtype(c10::DeviceType d);

 private:
  c10::DeviceType dev_;
  bool prev_on_;
  c10::ScalarType prev_dt_;
};

// A decoder (or its reduced-depth version) built from a TrainingSetup, written the way HF's
// eager GPT-2, Llama and Mixtral modelling code computes (see decoder.cpp for where it differs).
class Decoder {
 public:
  virtual ~Decoder() = default;
  // Forward and the loss the setup's runtime names: HF's causal-LM loss (logits.float(), shifted
  // labels, cross-entropy), or torchtune's chunked one (runtime.loss chunked). With `logits` the
  // caller gets the model's returned logits (the list's chunks, concatenated views not made) to
  // keep alive, as a loop that holds the forward's outputs does.
  virtual torch::Tensor loss(const torch::Tensor& ids, const torch::Tensor& labels,
                             std::vector<torch::Tensor>* logits = nullptr) = 0;
  virtual std::vector<torch::Tensor> parameters() = 0;
};
std::unique_ptr<Decoder> make_decoder(const TrainingSetup& s, const torch::Device& device);

}  // namespace memplan::calibrate
