// Files memplan writes (plan --emit --out, calibrate profiles): replaced atomically through a
// unique temporary beside the target, never clobbering an existing file, a symbolic link or a
// read-only file without force, never following a link. And the user's cache folder.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "estimator/error.h"

namespace memplan::profiles {

struct WriteOptions {
  bool force = false;  // replace an existing file (a link is replaced itself, never followed)
  Where where;         // what named the path (--out), for messages
  std::string what = "file";  // "the calibration profile", for messages
  // The files the command reads, with what named each ("--config"): never replaced, --force or
  // not (the same file through another name, a hard or a symbolic link, included).
  std::vector<std::pair<std::string, std::string>> inputs = {};
};

// The files a command reads from its setup inputs (--config, --calibration, a --model folder or
// config.json), for WriteOptions::inputs.
struct SetupInputs;
std::vector<std::pair<std::string, std::string>> input_files(const SetupInputs& in);

// Writes `text` to `path`: a temporary `.<name>.XXXXXX` in the same folder (mkstemp), flushed and
// fsync'ed, renamed over `path`; readers see the old file or the new one. InputError at
// opt.where when `path` exists and force is off (or is a folder, always), when the folder is
// missing or not writable, or when writing fails; no temporary is ever left behind.
void write_file_atomically(const std::string& path, const std::string& text, const WriteOptions& opt);
// Every file read_text_file read since the last forget_files_read() (the CLI forgets at the start
// of each command): a config's own references (its deepspeed: JSON, accelerate's
// deepspeed_config_file, a model's config.json) included. check_can_write refuses each of them,
// --force or not, by its device and inode, whatever name the output is given.
void note_file_read(uint64_t device, uint64_t inode, const std::string& path);
void forget_files_read();

// The checks write_file_atomically makes on the target before writing, for commands that want
// to refuse before a long run (calibrate).
void check_can_write(const std::string& path, const WriteOptions& opt);

// The user's cache folder for memplan, created if missing: $XDG_CACHE_HOME/memplan, else
// $HOME/.cache/memplan. InputError when neither variable gives a usable folder.
std::string cache_dir();

}  // namespace memplan::profiles
