// memplan completions: the bash script run by a real bash (its completion function called the way
// bash calls it, COMPREPLY read back), the zsh script parsed by zsh and its _arguments specs read
// through stand-ins for zsh's completion functions; and an example in every command's --help.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/commands.h"

namespace fs = std::filesystem;
using namespace memplan;

namespace {

std::string memplan_out(const std::vector<std::string>& args, int* code = nullptr) {
  std::vector<const char*> argv = {"memplan"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int c = cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  if (code) *code = c;
  return out.str() + err.str();
}

// Runs `script` with `shell`, returns its stdout.
std::string shell_out(const std::string& shell, const std::string& script) {
  static int n = 0;
  const fs::path f = fs::temp_directory_path() / fmt::format("memplan-completion-{}-{}", ::getpid(), ++n);
  std::ofstream(f) << script;
  std::string out;
  if (FILE* p = ::popen(fmt::format("{} {} 2>&1", shell, f.string()).c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  fs::remove(f);
  return out;
}

bool have(const char* program) { return std::system(fmt::format("command -v {} >/dev/null 2>&1", program).c_str()) == 0; }

std::string write_script(const std::string& shell) {
  const fs::path f = fs::temp_directory_path() / fmt::format("memplan-{}-{}.completion", ::getpid(), shell);
  int code = -1;
  std::ofstream(f) << memplan_out({"completions", shell}, &code);
  REQUIRE(code == 0);
  return f.string();
}

}  // namespace

TEST_CASE("memplan completions bash: bash completes commands, flags and their values from memplan's own lists") {
  const std::string script = write_script("bash");
  const std::string driver = fmt::format(
      "source {}\n"
      "t() {{ COMP_WORDS=(\"$@\"); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMPREPLY=(); _memplan; echo \"${{COMPREPLY[*]}}\"; }}\n"
      "t memplan est\n"
      "t memplan estimate --prec\n"
      "t memplan estimate --precision amp-\n"
      "t memplan plan --emit torch\n"
      "t memplan report --svg p\n"
      "t memplan estimate --gpu rtx-309\n"
      "t memplan estimate --model llama-3.2\n"
      "t memplan fit --no-lig\n"
      "t memplan check --format j\n"
      "t memplan estimate --format hf\n"
      "t memplan estimate --micro-batch ''\n"
      "t memplan watch --qui\n"
      "t memplan calibrate --fr\n"
      "t memplan measure --ste\n",
      script);
  const std::string out = shell_out("bash", driver);
  std::istringstream lines(out);
  std::vector<std::string> got;
  for (std::string l; std::getline(lines, l);) got.push_back(l);
  const std::vector<std::string> want = {"estimate",
                                         "--precision",
                                         "amp-fp16 amp-bf16",
                                         "torchtune",
                                         "phases plan probes",
                                         "rtx-3090 rtx-3090-ti",
                                         "llama-3.2-1b llama-3.2-3b",
                                         "--no-liger",
                                         "json junit",
                                         "hf-config hf-trainer",
                                         "",
                                         "--quiet",
                                         "--from",
                                         "--steps"};
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == want[i]);
  }
  fs::remove(script);
}

TEST_CASE("memplan completions zsh: a real interactive zsh (compinit, zpty) completes with it") {
  if (!have("zsh")) {
    MESSAGE("no zsh here (./dev.sh test installs it): the zsh script is not checked");
    return;
  }
  const std::string script = write_script("zsh");
  CHECK(shell_out("zsh", fmt::format("zsh -n {} && echo parsed\n", script)).find("parsed") != std::string::npos);
  // The script as a completion function on fpath, an interactive zsh under zpty with compinit,
  // a line typed and TAB pressed: what zsh lists (or an error from a broken _arguments spec).
  const fs::path dir = fs::temp_directory_path() / fmt::format("memplan-zsh-{}", ::getpid());
  fs::create_directories(dir);
  fs::copy_file(script, dir / "_memplan", fs::copy_options::overwrite_existing);
  const auto complete = [&](const std::string& typed, const std::string& until) {
    return shell_out("zsh -f", fmt::format(
        "zmodload zsh/zpty\n"
        "zpty -b z zsh -f -i\n"
        "zpty -w z 'PROMPT=\"> \"; fpath=({} $fpath); autoload -Uz compinit; compinit -u -D; "
        "zstyle \":completion:*\" menu no; LISTMAX=1000; memplan() {{ :; }}'\n"
        "zpty -w -n z $'{}\\t'\n"
        // What zsh lists, read until `until` shows up (compinit's first run is slow on a loaded
        // machine: a fixed second missed it under ctest -j2) or 20 s pass.
        "out=''\n"
        "for i in {{1..200}}; do sleep 0.1; while zpty -r -t z line; do out+=\"$line\"; done; [[ $out == *{}* ]] && break; done\n"
        "zpty -w -n z $'\\C-c'\n"
        "sleep 0.3\n"
        "while zpty -r -t z line; do out+=\"$line\"; done\n"
        "print -r -- \"$out\" | tr -d '\\r'\n"
        "zpty -d z\n",
        dir.string(), typed, until));
  };
  std::string out = complete("memplan estimate --loss ", "vocab-parallel");
  CHECK(out.find("vocab-parallel") != std::string::npos);
  CHECK(out.find("chunked:8") != std::string::npos);  // a value with a colon, escaped in the spec
  CHECK(out.find("parse error") == std::string::npos);
  CHECK(out.find("command not found") == std::string::npos);
  out = complete("memplan estimate --checkpointing ", "selective-op");
  CHECK(out.find("selective-op") != std::string::npos);
  CHECK(out.find("every:2") != std::string::npos);
  CHECK(out.find("parse error") == std::string::npos);
  out = complete("memplan calibrate --qui", "--quiet");
  CHECK(out.find("--quick") != std::string::npos);
  CHECK(out.find("--quiet") != std::string::npos);
  fs::remove_all(dir);
  fs::remove(script);
}

TEST_CASE("every command's --help ends with examples, and completions refuses an unknown shell") {
  for (const cli::Registrar& r : cli::command_table()) {
    const std::string name = r.name;
    if (name == "measure" || name == "calibrate") continue;  // forwarded: memplan-measure prints their help (calibrate_test.cpp)
    CAPTURE(name);
    const std::string help = memplan_out({name, "--help"});
    const size_t at = help.find("examples:\n  memplan " + name);
    CHECK(at != std::string::npos);
  }
  int code = -1;
  const std::string out = memplan_out({"completions", "fish"}, &code);
  CHECK(code == 2);
  CHECK(out.find("error: no completions for 'fish'") != std::string::npos);
}

TEST_CASE("completions offer only plain names: a preset file named with $(...) or quotes runs nothing on TAB") {
  // A data folder (MEMPLAN_DATA_DIR) with memplan's own files and three presets anyone could add.
  const fs::path data = fs::temp_directory_path() / fmt::format("memplan-completion-data-{}", ::getpid());
  fs::remove_all(data);
  fs::create_directories(data);
  const fs::path src = fs::path(MEMPLAN_TEST_DATA) / ".." / ".." / "profiles";
  for (const char* f : {"gpus.yaml", "families.yaml"}) fs::copy_file(src / f, data / f);
  fs::copy(src / "models", data / "models", fs::copy_options::recursive);
  const fs::path pwned = data / "PWNED";
  const std::string model = "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 2, \"vocab_size\": 100}";
  for (const std::string name : {std::string("evil$(touch ") + pwned.string() + ")", std::string("quo\"te"), std::string("back`id`")})
    std::ofstream(data / "models" / (name + ".json")) << model;
  std::ofstream(data / "models" / "plain-extra.json") << model;
  for (const char* shell : {"bash", "zsh"}) {
    CAPTURE(shell);
    const fs::path script = data / fmt::format("completion.{}", shell);
    const int rc = std::system(fmt::format("MEMPLAN_DATA_DIR='{}' '{}/memplan' completions {} > '{}'", data.string(), MEMPLAN_BUILD_DIR, shell,
                                           script.string())
                                   .c_str());
    REQUIRE(rc == 0);
    std::ifstream in(script);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("plain-extra") != std::string::npos);  // an added plain name is offered
    CHECK(text.find("evil") == std::string::npos);
    CHECK(text.find("quo\"te") == std::string::npos);
    CHECK(text.find("back`id`") == std::string::npos);
  }
  if (have("bash")) {  // and completing --model in a real bash runs nothing
    const std::string out = shell_out("bash", fmt::format("source '{}'\nCOMP_WORDS=(memplan estimate --model e)\nCOMP_CWORD=3\n_memplan\n"
                                                          "printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
                                                          (data / "completion.bash").string()));
    CHECK_FALSE(fs::exists(pwned));
  }
  fs::remove_all(data);
}
