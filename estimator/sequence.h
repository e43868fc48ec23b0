// The allocation sequence of a training process, unrolled from the estimator's own segment
// simulation (graph.h Segment::simulate with a SimRecord), and what PyTorch's caching allocator
// makes of it (allocator.h). Where estimate.cpp composes segment profiles into phase peaks, this
// walks what really happens in a process, tensor by tensor, in order: the model build (each
// parameter tensor moved to the GPU in parameter order), then N steps of the HF-style loop
//   loss = model(input_ids=ids, labels=ids).loss; loss.backward(); opt.step(); opt.zero_grad()
// (forward through the embedding, every layer and the head and loss under autocast, whose cache
// of weight copies empties when the forward returns; backward head -> layers -> embedding, each
// op's parameter gradients made as its backward runs; the optimizer step: step 1 creates the
// states parameter by parameter, foreach AdamW allocates one temporary per parameter and frees
// them together, the for-loop two per parameter at a time, fused none; zero_grad(set_to_none)
// frees the gradients). Sizes are the tensors' own (a (b, s, h) bf16 tensor is b*s*h*2 bytes),
// because the allocator's segment packing depends on them.
//
// Covered: one GPU, no ZeRO/FSDP/offload/pipeline/tensor parallelism, full fine-tuning and LoRA
// (modules_to_save's copies of untied embeddings and head too),
// AdamW/Adam/SGD(-momentum) and transformers' Adafactor (with or without beta1; not on MoE),
// fp32/AMP/pure 16-bit precisions, torch 1.x and 2.x, the HF loop
// (outputs dropped before backward, zero_grad(set_to_none=True)) and three others: a loop that
// keeps the model's outputs (the logits freed when the next forward returns), zero_grad(
// set_to_none=False) (the gradients made once, added into after) and Lightning's zero_grad after
// the next forward; with gradient accumulation each step is micro-step 1 (gradients made) and one
// later micro-step (contributions added into them) that stands for micro-steps 2..N. Anything else
// reports why it is not modelled, and the estimate keeps its percentage for the allocator.
//
// Against the real history (tests/data/gpu/traces/trace-l-qwen05-amp-gc, Qwen2.5-0.5B amp-bf16 full
// checkpointing 4x1024, step 3): the real step makes 5,234 allocations (57.6 GB of traffic), the
// sequence 4,236 (52.3 GB). Per layer the real one has about 7 more fp32 (b, s, h) tensors
// (14,680,064 B), 3 of 29,360,128 B and 2 of 4 MiB (cuDNN attention's backward, by their sizes), one
// more bf16 (b, s, h) and two more of each k/v size, and the small-pool scalars (philox seeds and
// offsets, 256 B, 8 B) that the segment tables do not list. None of them is alive at the peak
// (allocated agrees to 0.01%) and the reserved peak agrees to 0.08%.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/allocator.h"
#include "estimator/setup.h"

namespace memplan {

// Why the setup's sequence is not modelled ("" when it is): on a CUDA card, what
// step_sequence_not_modelled says.
std::string sequence_not_modelled(const TrainingSetup& s);
// Why the tensors of the setup's steps are not modelled, on whatever device ("" when they are):
// allocation_sequence's requirement. On CPU the sequence is what LibTorch's CPU allocator sees
// (no cuBLAS workspace), which the recorded CPU steps check event by event
// (tests/calibrate/sequence_events_test.cpp); only CUDA's caching allocator replays it.
std::string step_sequence_not_modelled(const TrainingSetup& s);

struct AllocationSequence {
  std::vector<AllocatorEvent> events;
  size_t last_step_begin = 0;  // index of the first event of the last step (peaks are reset there)
  std::vector<size_t> step_begins;  // index of each step's first event (the last is last_step_begin)
  int64_t swept_bytes = 0;     // tensors the segment walk left alive at a step's end, freed there
  size_t expected_events = 0;  // the sequence's length, known before it is unrolled
  int64_t peak_bytes = 0;      // the most tensor bytes alive during the last step (un-rounded)
  int64_t process_peak_bytes = 0;  // the most tensor bytes alive at once in the whole process (un-rounded)
};

// The process's events: the model build and `steps` training steps. Event ids are small: 0, 1, ...,
// a freed tensor's id taken by the next new one (replay() keeps such ids in a vector). With
// `max_events` > 0 and a longer sequence (a model with many experts), no events are made
// (expected_events says how many there would be). REQUIRES: step_sequence_not_modelled(s) is empty,
// steps >= 1.
AllocationSequence allocation_sequence(const TrainingSetup& s, int steps = 3, size_t max_events = 0);

// The elements of each tensor the optimizer steps, in the order it steps them (the parameters in
// registration order; LoRA's adapters in PEFT's order, with modules_to_save's copies of the
// embeddings first and of the head last): the sequence's, for the estimator's
// per-parameter optimizer temporaries (transformers' Adafactor holds the previous parameter's
// update while it makes the next one's).
std::vector<int64_t> stepped_parameter_elements(const TrainingSetup& s);

// The allocator settings of the setup (runtime.expandable_segments; PyTorch's defaults otherwise).
AllocatorConfig allocator_config(const TrainingSetup& s);

struct ReservedPrediction {
  bool modelled = false;
  std::string why_not;          // when not modelled
  int64_t peak_reserved = 0;    // over the last step (reserved never shrinks without OOM retries)
  int64_t peak_allocated = 0;   // over the last step, as torch.cuda.max_memory_allocated counts it
  int64_t peak_requested = 0;   // over the last step, the tensors' own bytes (no rounding): the
                                // estimator's allocated peak, if the sequence is consistent with it
  int64_t oom_boundary = -1;    // the smallest allocator capacity that runs the whole process (-1: not asked)
  // With a capacity and a peak reserved above it: whether the process still runs in it (the
  // allocator frees its cache and retries before failing); -1: not tried.
  int runs_in_capacity = -1;
  // With a fallback capacity, where the process does not run in `capacity` and its peak reserved is
  // above the fallback: whether it runs in the fallback; -1: not asked.
  int runs_in_fallback = -1;
};

// Replays allocation_sequence(s) through CachingAllocatorModel with the setup's allocator settings;
// `boundary` also bisects for the out-of-memory boundary (about 20 more replays). With
// `capacity` > 0 (the memory the allocator can get) and a peak reserved above it, one more replay
// with that capacity says whether the process runs there. Not modelled either when the sequence
// would be longer than `max_events` (0: no limit). `steps`: the training steps unrolled (the data
// set's loop measures the third; on its 15 H200 cases the second gives the same peaks).
// The answers are remembered (a bounded memo, safe across threads, keyed by everything the
// sequence and the replays depend on), so asking again about the same sequence, with the same or
// another capacity, costs the segment simulation and the replays not yet made; the capped replay
// is skipped where the live tensors alone outgrow the capacity (it could only run out of memory).
// `fallback` > 0: where the process does not run in `capacity`, whether it runs in `fallback`
// (runs_in_fallback), the two capped replays made in the uncapped one's pass.
ReservedPrediction predict_reserved(const TrainingSetup& s, bool boundary = true, size_t max_events = 0,
                                    int64_t capacity = 0, int steps = 3, int64_t fallback = 0);
// Only whether the process runs with the allocator capped at `capacity` (> 0): runs_in_capacity
// is 1 or 0, the peaks left unset. One replay capped there, where predict_reserved makes the
// uncapped one and the capped one beside it: what a search for the largest micro-batch that runs
// at all needs. The same memo as predict_reserved (a capped replay that refuses no segment is the
// uncapped one, and is remembered as it).
ReservedPrediction predict_runs(const TrainingSetup& s, size_t max_events, int64_t capacity, int steps = 3);
// Empties predict_reserved's memo (benchmarks that time the replays themselves).
void forget_replays();

}  // namespace memplan
