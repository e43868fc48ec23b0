// InputError: the one error type for bad user input (files, flags, impossible setups). It carries
// where the input came from (file:line:col or a --flag) and a hint. Only cli/ catches it, prints
// it and exits 2. Internal invariants use MEMPLAN_CHECK instead, which reports __FILE__:__LINE__.
#pragma once

#include <stdexcept>
#include <string>

namespace memplan {

// Where a value came from. line/col are 1-based; 0 means "no position" (a whole file, or a flag).
struct Where {
  std::string file;  // config path as the user gave it
  int line = 0;
  int col = 0;
  std::string flag;  // "--micro-batch" when the value came from the command line
  std::string key;   // the config key that set a value ("training.micro_batch_size"), for provenance

  bool empty() const { return file.empty() && flag.empty(); }
  static Where at_flag(std::string f) { Where w; w.flag = std::move(f); return w; }
  static Where at_file(std::string f, int line = 0, int col = 0) { Where w; w.file = std::move(f); w.line = line; w.col = col; return w; }
  // "cfg.yaml:7:3", "cfg.yaml", "--micro-batch" or "".
  std::string str() const;
};

class InputError : public std::runtime_error {
 public:
  InputError(Where where, const std::string& message, std::string hint = {});
  const Where& where() const { return where_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }
  // "cfg.yaml:7:3: error: unknown key 'num_head'\nhint: did you mean 'num_heads'?"
  // or "error: --micro-batch: must be at least 1 (got 0)".
  std::string render() const;

 private:
  Where where_;
  std::string message_;
  std::string hint_;
};

// A warning that does not stop the run ("did you mean" on a near-miss key).
struct Warning {
  Where where;
  std::string message;
  std::string hint;
  std::string render() const;  // same shape as InputError::render with "warning:"
};

// Internal invariant violated: a bug in memplan, never bad input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void check_failed(const char* file, int line, const char* expr, const std::string& msg);

}  // namespace memplan

#define MEMPLAN_CHECK(cond, msg) \
  do { if (!(cond)) ::memplan::check_failed(__FILE__, __LINE__, #cond, (msg)); } while (0)
