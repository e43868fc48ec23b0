// `--model ORG/NAME` on the command line: a model fetched from a Hub (a real HTTP server on
// 127.0.0.1 through HF_ENDPOINT) is estimated; a Hub error is exit 2 with the model and the reason.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "tests/profiles/local_hub.h"

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

Run invoke(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"memplan"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Run r;
  r.code = memplan::cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace

TEST_CASE("memplan estimate --model ORG/NAME through the Hub; Hub errors exit 2") {
  memplan::testing::TempDir dir;
  memplan::testing::EnvGuard env;
  memplan::testing::LocalHub hub;
  env.set("XDG_CACHE_HOME", dir.path() + "/xdg");
  env.set("HF_HOME", dir.path() + "/hf-home");
  env.set("HF_HUB_CACHE", dir.path() + "/hf-hub");
  env.set("HF_ENDPOINT", hub.endpoint());
  for (const char* v : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE"}) env.unset(v);
  hub.add("test-org/tiny-llama", {200,
                                  R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
                                      "intermediate_size": 688, "num_attention_heads": 8, "num_hidden_layers": 2,
                                      "vocab_size": 1000})",
                                  "", 0});
  const Run ok = invoke({"estimate", "--model", "test-org/tiny-llama", "--micro-batch", "1", "--seq-len", "64"});
  CHECK(ok.code == 0);
  CHECK(ok.out.rfind("memplan estimate: test-org/tiny-llama (", 0) == 0);
  const Run missing = invoke({"estimate", "--model", "test-org/no-such-model"});
  CHECK(missing.code == 2);
  CHECK(missing.err.find("error: --model: the Hub has no config.json for 'test-org/no-such-model' (HTTP 404)") != std::string::npos);
  env.set("HF_HUB_OFFLINE", "1");
  const Run offline = invoke({"estimate", "--model", "test-org/another"});
  CHECK(offline.code == 2);
  CHECK(offline.err.find("HF_HUB_OFFLINE forbids fetching it") != std::string::npos);
}
