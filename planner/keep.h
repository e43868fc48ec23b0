// The user's own config file with only what a plan changes: `memplan plan --config FILE --emit
// FORMAT`, when FILE is already in FORMAT, writes FILE again with the values the plan changes
// and nothing else touched (comments, key order, the learning rate, the dataset, the special
// tokens ...), instead of a fresh file in memplan's words.
//
// What "the plan changes" means is decided by the emitter itself: the format's emitter writes the
// file's own setup (`before`) and the plan's (`after`); every key whose value differs between the
// two is set in the user's text as `after` has it (added where the file lacks it, removed where
// `after` drops it). A key the two agree on is left as the user wrote it, in whatever words.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace memplan::planner {

struct KeptFile {
  std::string text;                  // the user's file with the plan's changes
  std::vector<std::string> changes;  // "micro_batch_size: 4 -> 2", "+ gradient_accumulation_steps: 16", "- deepspeed"
};

// How a tool's files may say what its emitter writes otherwise, so that a change goes where the
// user's file already says it, not beside it.
struct KeyVocabulary {
  // Names the tool reads for one setting at one level of its file (HF: dtype and torch_dtype).
  std::vector<std::vector<std::string>> synonyms;
  // Maps whose keys count as their parent's (LightningCLI's class_path + init_args: data.batch_size
  // is data.init_args.batch_size).
  std::vector<std::string> see_through;
};

// `user` is the user's config text: YAML, or JSON when it opens with '{' (a DeepSpeed config, an
// HF script's JSON arguments). `before` and `after` are what the format's emitter writes for the
// file's setup and for the plan's (YAML or JSON); the header comment block `after` opens with
// heads the result (YAML), with a line per change and `source` named, replacing the header of an
// earlier memplan plan. Throws KeepError when an edit cannot be placed or the result does not
// parse; the caller then writes the emitter's own file and says why.
KeptFile keep_user_file(const std::string& user, const std::string& before, const std::string& after, const std::string& source,
                        const KeyVocabulary& vocabulary = {});

struct KeepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace memplan::planner
