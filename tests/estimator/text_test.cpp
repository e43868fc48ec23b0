// The escaping layer (estimator/text.h): each output format's function, on the strings that broke
// the writers (issue 24): a newline that starts a YAML key, " #" that truncates a name, YAML's
// typed words and numbers, control characters and bytes that are not UTF-8.
#include <doctest/doctest.h>

#include "tests/capture.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>
#include <unistd.h>

#include <fmt/format.h>
#include <string>

#include "estimator/text.h"

using namespace memplan::text;

TEST_CASE("text: YAML scalars read back as the string they were") {
  CHECK(yaml_scalar("meta-llama/Llama-3.2-1B") == "meta-llama/Llama-3.2-1B");
  CHECK(yaml_scalar("./models/config.json") == "\"./models/config.json\"");  // a leading '.' is quoted
  CHECK(yaml_scalar("evil\nper_device_train_batch_size: 64") == "\"evil\\nper_device_train_batch_size: 64\"");
  CHECK(yaml_scalar("name #comment") == "\"name #comment\"");
  CHECK(yaml_scalar("say \"hi\" \\ now") == "\"say \\\"hi\\\" \\\\ now\"");
  for (const char* typed : {"true", "No", "null", "~", "on", "1", "1.5", "1e5", "-3", ".inf"})
    CHECK(yaml_scalar(typed) == std::string("\"") + typed + "\"");
  CHECK(yaml_scalar("") == "\"\"");
  CHECK(yaml_scalar("- item") == "\"- item\"");
  CHECK(yaml_scalar("tab\there\x01") == "\"tab\\there\\x01\"");
  CHECK(yaml_scalar("caf\xc3\xa9") == "\"caf\xc3\xa9\"");  // UTF-8 kept as it is, quoted (not plain-safe)
  CHECK(yaml_scalar("bad\xff") == "\"bad\\xFF\"");
}

TEST_CASE("text: a comment stays one line") {
  CHECK(comment_text("llama-3.2-1b on 1 x a100-80gb") == "llama-3.2-1b on 1 x a100-80gb");
  CHECK(comment_text("model\nx: 1") == "model\\x0Ax: 1");
  CHECK(comment_text("a\rb\x7f") == "a\\x0Db\\x7F");
  CHECK(comment_text("caf\xc3\xa9 \xfe") == "caf\xc3\xa9 \\xFE");
}

TEST_CASE("text: XML 1.0 holds every name") {
  CHECK(xml_text("<a href=\"x\">&'") == "&lt;a href=&quot;x&quot;&gt;&amp;&apos;");
  CHECK(xml_text("tab\tnl\ncr\r") == "tab\tnl\ncr\r");
  CHECK(xml_text("bell\x07") == "bell\\x07");
  CHECK(xml_text("\xef\xbf\xbe") == "\\xEF\\xBF\\xBE");  // U+FFFE: UTF-8, no XML character
  CHECK(xml_text("\xc3\x28") == "\\xC3(");
  CHECK(utf8_length("\xf0\x9f\x98\x80", 0) == 4);
  CHECK(utf8_length("\xed\xa0\x80", 0) == 0);  // a surrogate
}

TEST_CASE("text: thousands separators, signs and the extremes") {
  CHECK(memplan::text::thousands(0) == "0");
  CHECK(memplan::text::thousands(999) == "999");
  CHECK(memplan::text::thousands(1000) == "1,000");
  CHECK(memplan::text::thousands(1235814400) == "1,235,814,400");
  CHECK(memplan::text::thousands(-1234567) == "-1,234,567");
  CHECK(memplan::text::thousands(INT64_MAX) == "9,223,372,036,854,775,807");
  CHECK(memplan::text::thousands(INT64_MIN) == "-9,223,372,036,854,775,808");
}

namespace {

using memplan::testing::capture_output;

// Strings built from every character class that matters to a shell, a terminal and YAML 1.1.
std::vector<std::string> hostile_strings() {
  std::vector<std::string> v = {"plain-name_1.2", "", "a b", "x; touch PWNED #", "$(touch PWNED)", "`id`", "it's", "\"q\"",
                                "back\\slash", "glob*?[a]", "~user", "semi;colon&amp|pipe>redir<in", "new\nline",
                                "esc\x1b[31mred", "tab\there", "nel\xc2\x85x: 1", "ls\xe2\x80\xa8x: 1", "ps\xe2\x80\xa9x: 1",
                                "bidi\xe2\x80\xaetxt.exe", "caf\xc3\xa9", "bad\xff\xfe", "del\x7f", "!event", "${HOME}", "%s%n",
                                "-rf", "a'b'c", "'\\''", "'"};
  std::string all;
  for (int c = 1; c < 128; ++c) all += static_cast<char>(c);
  v.push_back(all);
  return v;
}

}  // namespace

TEST_CASE("text: a shell word reads back as itself in bash, zsh and dash, and runs nothing") {
  const std::string pwned = "PWNED";
  for (const std::string& v : hostile_strings()) {
    const std::string w = shell_word(v);
    CAPTURE(w);
    // Nothing a terminal or a reader would take as a control reaches the line.
    for (unsigned char c : w) CHECK((c >= 0x20 && c != 0x7F));
    CHECK(w.find("\xe2\x80\xa8") == std::string::npos);
    CHECK(w.find("\xe2\x80\xae") == std::string::npos);
    for (const char* sh : {"bash", "zsh", "dash"}) {
      const bool dollar_quote = w.rfind("$'", 0) == 0;
      if (dollar_quote && std::string(sh) == "dash") continue;  // $'...' is bash's and zsh's (and POSIX 2024's)
      if (std::system(fmt::format("command -v {} >/dev/null 2>&1", sh).c_str()) != 0) continue;
      CAPTURE(sh);
      const std::string script = "printf '%s' " + w;
      // The script goes through a file, as a pasted line would be read, not through another quoting.
      const std::string file = fmt::format("/tmp/memplan-shell-word-{}.sh", ::getpid());
      std::ofstream(file) << script;
      const std::string out = capture_output(fmt::format("cd /tmp && {} {} 2>/dev/null", sh, file));
      std::remove(file.c_str());
      CHECK(out == v);
      CHECK_FALSE(std::ifstream("/tmp/" + pwned).good());
    }
  }
  CHECK(shell_word("qwen2.5-0.5b") == "qwen2.5-0.5b");
  CHECK(shell_word("x; touch PWNED #") == "'x; touch PWNED #'");
  CHECK(shell_word("it's") == "'it'\\''s'");
  CHECK(shell_word("esc\x1b[31m") == "$'esc\\x1B[31m'");
}

TEST_CASE("text: YAML 1.1 line ends and reordering characters are escapes, read back by PyYAML as they were") {
  CHECK(yaml_scalar("a\xe2\x80\xa8" "b") == "\"a\\u2028b\"");
  CHECK(yaml_scalar("a\xc2\x85" "b") == "\"a\\u0085b\"");
  CHECK(comment_text("model\xe2\x80\xa9x: 1") == "model\\u2029x: 1");
  CHECK(comment_text("bidi\xe2\x80\xae") == "bidi\\u202E");
  if (std::system("/usr/bin/python3 -c 'import yaml' >/dev/null 2>&1") != 0) {
    MESSAGE("no PyYAML for /usr/bin/python3: the YAML 1.1 read-back is skipped");
    return;
  }
  // A document of a comment and a value per string, read by PyYAML (YAML 1.1, what TRL, Axolotl,
  // LLaMA-Factory, accelerate and LightningCLI read): one key, the value as written.
  for (const std::string& v : hostile_strings()) {
    if (utf8_length(v, 0) == 0 && !v.empty()) continue;
    bool utf8 = true;
    for (size_t i = 0; i < v.size() && utf8;) {
      const size_t n = utf8_length(v, i);
      utf8 = n > 0;
      i += n ? n : 1;
    }
    const std::string doc = "# " + comment_text(v) + "\nvalue: " + yaml_scalar(v) + "\n";
    const std::string file = fmt::format("/tmp/memplan-yaml11-{}.yaml", ::getpid());
    std::ofstream(file, std::ios::binary) << doc;
    const std::string out = capture_output(fmt::format(
        "/usr/bin/python3 -c \"import yaml,sys; d=yaml.safe_load(open('{}', encoding='utf-8', errors='surrogateescape')); "
        "sys.stdout.buffer.write((','.join(sorted(d)) + '|' + d['value']).encode('utf-8', 'surrogateescape'))\" 2>&1",
        file));
    std::remove(file.c_str());
    CAPTURE(doc);
    if (!utf8) {  // a byte that is not UTF-8 is written \xNN: read back as U+00NN, one key still
      CHECK(out.rfind("value|", 0) == 0);
      continue;
    }
    CHECK(out == "value|" + v);
  }
}
