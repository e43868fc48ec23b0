// The escaping layer (estimator/text.h): each output format's function, on the strings that broke
// the writers (issue 24): a newline that starts a YAML key, " #" that truncates a name, YAML's
// typed words and numbers, control characters and bytes that are not UTF-8.
#include <doctest/doctest.h>

#include <cstdint>
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
