// memplan completions bash|zsh: a completion script generated from the commands' own flag table
// (every command registered as memplan registers it, its CLI11 options walked), so a new flag or
// command completes without touching a script. Values complete from the same lists the parsers
// accept (precision_names(), the GPU and model presets, --emit's formats, ...); FILE and DIR
// arguments complete file names.
#include <cctype>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <ostream>
#include <sstream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/measure_flags.h"
#include "planner/emit.h"
#include "profiles/profiles.h"
#include "report/report.h"

namespace memplan::cli {
namespace {

struct Flag {
  std::vector<std::string> names;  // "--precision" (and "--no-..." for a switch)
  bool takes_value = false;
  bool file = false;                 // FILE / DIR: complete file names
  std::vector<std::string> choices;  // the accepted values, when they are a list
  std::string help;
};
struct Cmd {
  std::string name, help;
  std::vector<Flag> flags;
};

// The values an option accepts, by command and long name ("" command: any command).
std::vector<std::string> choices_of(const std::string& command, const std::string& option) {
  static const std::map<std::string, std::vector<std::string> (*)()> kLists = {
      {"--emit", planner::emit_format_names},
      {"--svg", report::chart_names},
  };
  // The registry's choices (estimator/fields.h): the values each takes; the forms with a number
  // (checkpointing's every:K) by an instance.
  for (const ChoiceField& f : choice_fields())
    if (option == f.flag) return f.samples();
  if (command == "check" && option == "--format") return {"text", "json", "github", "junit"};
  if (option == "--format") return profiles::config_format_names();
  if (option == "--svg") {
    auto v = report::chart_names();
    v.push_back("run");
    return v;
  }
  if (const auto it = kLists.find(option); it != kLists.end()) return it->second();
  // The targets' and the ZeRO stage's values (estimator/fields.h's rows; calibrate's and measure's
  // --device names a torch device).
  if (option == field(Target::device).flag)
    return command == "calibrate" || command == "measure" ? std::vector<std::string>{"cpu", "cuda:0"} : std::vector<std::string>{"cuda", "cpu"};
  if (option == field(Target::gpu).flag) {
    std::vector<std::string> v;
    for (const profiles::GpuProfile* g : profiles::gpu_catalog().all()) v.push_back(g->name);
    return v;
  }
  if (option == "--model") {
    std::vector<std::string> v;
    for (const profiles::ModelPreset& m : profiles::model_presets()) v.push_back(m.name);
    return v;
  }
  if (option == "--tier") return {"safe", "balanced", "aggressive"};
  if (option == "--source") return {"auto", "nvml", "rocm-smi", "process"};
  if (option == field(Count::zero_stage).flag) return {"0", "1", "2", "3"};  // validate()'s stages
  return {};
}

// The words a script may offer: preset and card names come from data files anyone can add to
// (MEMPLAN_DATA_DIR, a models/ folder), and a script puts them inside bash's `compgen -W "..."`
// and zsh's value specs, where `$(...)`, a quote, a backquote or a space would run or split. Only
// names of letters, digits and . _ - : + are offered (every shipped name is one); others are left
// out, by construction rather than by quoting each shell's way.
std::vector<std::string> completable(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    bool plain = !n.empty() && n.size() <= 128;
    for (unsigned char c : n) plain = plain && (std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == ':' || c == '+');
    if (plain) out.push_back(n);
  }
  return out;
}

// Every command as memplan registers it (the table behind `memplan --help`).
std::vector<Cmd> walk() {
  std::ostringstream out, err;
  const Io io{out, err};
  CLI::App root;
  std::vector<Cmd> cmds;
  for (const Registrar& r : command_table()) {
    const std::string name = r.name;
    // measure and calibrate are forwarded to memplan-measure: their flags come from the definition
    // it runs them with (measure_flags.h).
    CLI::App* app = name == "measure" ? add_measure_command(root).app : name == "calibrate" ? add_calibrate_command(root).app : r.add(root, io).app;
    Cmd cmd{r.name, app->get_description(), {}};
    for (const CLI::Option* o : app->get_options()) {
      if (o->get_lnames().empty()) continue;  // positionals and --help's short form alone
      Flag f;
      for (const std::string& n : o->get_lnames()) f.names.push_back("--" + n);
      f.takes_value = o->get_items_expected_max() > 0;
      const std::string type = o->get_type_name();
      f.file = type.find("FILE") != std::string::npos || type.find("DIR") != std::string::npos;
      if (f.takes_value) f.choices = completable(choices_of(r.name, f.names.front()));
      f.help = o->get_description();
      cmd.flags.push_back(std::move(f));
    }
    cmds.push_back(std::move(cmd));
  }
  return cmds;
}

std::string words(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& w : v) s += (s.empty() ? "" : " ") + w;
  return s;
}

// A word list for bash's compgen -W (the names are plain: completable()).
std::string bash_script(const std::vector<Cmd>& cmds) {
  std::vector<std::string> names;
  for (const Cmd& c : cmds) names.push_back(c.name);
  std::string s = fmt::format(
      "# bash completion for memplan {} (generated by `memplan completions bash` from its flag table)\n"
      "_memplan() {{\n"
      "  local cur=\"${{COMP_WORDS[COMP_CWORD]}}\" prev=\"${{COMP_WORDS[COMP_CWORD-1]}}\"\n"
      "  COMPREPLY=()\n"
      "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
      "    COMPREPLY=($(compgen -W \"{} --help --version\" -- \"$cur\"))\n"
      "    return 0\n"
      "  fi\n"
      "  case \"${{COMP_WORDS[1]}}\" in\n",
      MEMPLAN_VERSION, words(names));
  for (const Cmd& c : cmds) {
    s += fmt::format("    {})\n      case \"$prev\" in\n", c.name);
    std::vector<std::string> all;
    for (const Flag& f : c.flags) {
      all.insert(all.end(), f.names.begin(), f.names.end());
      if (!f.takes_value) continue;
      if (!f.choices.empty())
        s += fmt::format("        {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return 0 ;;\n", f.names.front(), words(f.choices));
      else if (f.file)
        s += fmt::format("        {}) COMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;\n", f.names.front());
      else
        s += fmt::format("        {}) return 0 ;;\n", f.names.front());
    }
    s += fmt::format("      esac\n      if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"));\n"
                     "      else COMPREPLY=($(compgen -f -- \"$cur\")); fi\n      ;;\n",
                     words(all));
  }
  s += "  esac\n  return 0\n}\ncomplete -o filenames -F _memplan memplan\n";
  return s;
}

// Text for zsh's _arguments specs and _describe lists: no [ ] : ' \ (they delimit the spec).
std::string zsh_text(const std::string& t) {
  std::string s;
  for (char c : t) {
    if (c == '[' || c == ']') s += c == '[' ? '(' : ')';
    else if (c == ':' || c == '\'' || c == '\\' || c == '`' || c == '$' || c == '\n') s += ' ';
    else s += c;
  }
  if (s.size() > 70) s = s.substr(0, 67) + "...";
  return s;
}

// Values in an _arguments action's (...) list: a colon ends the action's field, so each is \:.
std::string zsh_values(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& w : v) {
    if (!s.empty()) s += ' ';
    for (char c : w) {
      if (c == ':') s += "\\:";
      else s += c;
    }
  }
  return s;
}

std::string zsh_script(const std::vector<Cmd>& cmds) {
  std::string s = fmt::format(
      "#compdef memplan\n# zsh completion for memplan {} (generated by `memplan completions zsh` from its flag table)\n"
      "_memplan() {{\n  local -a commands\n  commands=(\n",
      MEMPLAN_VERSION);
  for (const Cmd& c : cmds) s += fmt::format("    '{}:{}'\n", c.name, zsh_text(c.help));
  s += "  )\n  if (( CURRENT == 2 )); then\n    _describe 'command' commands\n    return\n  fi\n  case $words[2] in\n";
  for (const Cmd& c : cmds) {
    s += fmt::format("    {})\n      _arguments -s \\\n", c.name);
    for (const Flag& f : c.flags) {
      const std::string help = zsh_text(f.help);
      for (const std::string& n : f.names) {
        std::string spec = fmt::format("'{}[{}]", n, help);
        if (f.takes_value) {
          if (!f.choices.empty()) spec += fmt::format(":value:({})", zsh_values(f.choices));
          else if (f.file) spec += ":file:_files";
          else spec += ":value: ";
        }
        s += "        " + spec + "' \\\n";
      }
    }
    s += "        '*:file:_files'\n      ;;\n";
  }
  s += "  esac\n}\n_memplan \"$@\"\n";
  return s;
}

}  // namespace

Command register_completions(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("completions", "print a bash or zsh completion script for memplan (generated from its flags)");
  auto shell = std::make_shared<std::string>();
  app->add_option("shell", *shell, "bash or zsh")->required();
  return {app, [io, shell] {
            if (*shell != "bash" && *shell != "zsh")
              throw InputError(Where{}, fmt::format("no completions for '{}'", profiles::clip(*shell)), "memplan completions bash, or zsh");
            const std::vector<Cmd> cmds = walk();
            io.out << (*shell == "bash" ? bash_script(cmds) : zsh_script(cmds));
            return kExitOk;
          }};
}

}  // namespace memplan::cli
