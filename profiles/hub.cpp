// Hub ids -> config.json: the Hugging Face cache, memplan's cache, then the Hub over HTTPS through
// libcurl opened with dlopen (see hub.h). The cache layout and environment variables are
// huggingface_hub's (src/huggingface_hub/constants.py and file_download.py @ v0.26.2): a model's
// files live in <cache>/models--ORG--NAME/snapshots/<commit>/, refs/main holds the commit main
// points to, and a file is fetched from <endpoint>/ORG/NAME/resolve/main/<file>.
#include "profiles/hub.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#define CURL_DISABLE_TYPECHECK  // the API is called through dlsym'd pointers
#include <curl/curl.h>
#include <fmt/format.h>

#include "profiles/detail.h"

namespace memplan::profiles::hub {
namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultEndpoint = "https://huggingface.co";
constexpr long kDefaultTimeoutSeconds = 30;
// refs/main holds a 40-character commit hash, a token file one token: a few KiB is plenty.
constexpr int64_t kMaxSmallFileBytes = 64 * 1024;
constexpr size_t kMaxConfigBytes = 16 << 20;  // a config.json is kilobytes; anything this big is not one

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool truthy(const std::string& v) {
  const std::string l = detail::lower(v);
  return l == "1" || l == "true" || l == "yes" || l == "on";
}

// $XDG_CACHE_HOME, else ~/.cache (empty when neither is known).
std::string user_cache_dir() {
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x;
  if (const std::string h = env("HOME"); !h.empty()) return h + "/.cache";
  return "";
}

std::string hf_home() {
  if (const std::string h = env("HF_HOME"); !h.empty()) return h;
  const std::string c = user_cache_dir();
  return c.empty() ? "" : c + "/huggingface";
}

std::string endpoint() {
  std::string e = env("HF_ENDPOINT");
  if (e.empty()) e = kDefaultEndpoint;
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

std::string token() {
  if (const std::string t = env("HF_TOKEN"); !t.empty()) return t;
  if (const std::string t = env("HUGGING_FACE_HUB_TOKEN"); !t.empty()) return t;
  std::string path = env("HF_TOKEN_PATH");
  if (path.empty() && !hf_home().empty()) path = hf_home() + "/token";
  // A shared cache's token file can be anything another user made it (a FIFO, a device): read only
  // a small regular file, without blocking.
  std::string t = detail::read_small_file(path, kMaxSmallFileBytes).value_or("");
  t = t.substr(0, t.find('\n'));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  return t;
}

long timeout_seconds() {
  const std::string t = env("MEMPLAN_HUB_TIMEOUT");
  char* end = nullptr;
  const long v = t.empty() ? 0 : std::strtol(t.c_str(), &end, 10);
  return v > 0 && end && *end == '\0' ? v : kDefaultTimeoutSeconds;
}

std::string read_first_line(const fs::path& p) {
  std::string s = detail::read_small_file(p.string(), kMaxSmallFileBytes).value_or("");
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// ---- libcurl, loaded on first use --------------------------------------------------------------

struct Curl {
  CURLcode (*global_init)(long) = nullptr;
  CURL* (*easy_init)() = nullptr;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...) = nullptr;
  CURLcode (*easy_perform)(CURL*) = nullptr;
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...) = nullptr;
  void (*easy_cleanup)(CURL*) = nullptr;
  const char* (*easy_strerror)(CURLcode) = nullptr;
  curl_slist* (*slist_append)(curl_slist*, const char*) = nullptr;
  void (*slist_free_all)(curl_slist*) = nullptr;
};

// nullptr with `why` set when no libcurl can be opened. Debian's libcurl4 (OpenSSL) first, then
// the GnuTLS build some systems have instead.
const Curl* load_curl(std::string* why) {
  static Curl curl;
  static std::string error;
  static const bool ok = [] {
    void* lib = nullptr;
    for (const char* name : {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      const char* e = dlerror();
      error = e ? e : "dlopen failed";
      return false;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && error.empty()) error = fmt::format("libcurl has no {}", name);
    };
    sym(curl.global_init, "curl_global_init");
    sym(curl.easy_init, "curl_easy_init");
    sym(curl.easy_setopt, "curl_easy_setopt");
    sym(curl.easy_perform, "curl_easy_perform");
    sym(curl.easy_getinfo, "curl_easy_getinfo");
    sym(curl.easy_cleanup, "curl_easy_cleanup");
    sym(curl.easy_strerror, "curl_easy_strerror");
    sym(curl.slist_append, "curl_slist_append");
    sym(curl.slist_free_all, "curl_slist_free_all");
    if (!error.empty()) return false;
    return curl.global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK || (error = "curl_global_init failed", false);
  }();
  if (!ok && why) *why = error;
  return ok ? &curl : nullptr;
}

struct Body {
  std::string text;
  bool too_big = false;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<Body*>(user);
  const size_t n = size * count;
  if (body->text.size() + n > kMaxConfigBytes) {
    body->too_big = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  body->text.append(data, n);
  return n;
}

// Writes `text` to `path` through a temporary file in the same folder and a rename, so a reader
// never sees half a file. InputError at `origin` when the cache cannot be written.
void write_atomically(const std::string& path, const std::string& text, const Where& origin) {
  std::error_code ec;
  const fs::path target(path);
  fs::create_directories(target.parent_path(), ec);
  std::string tmp = (target.parent_path() / (target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ec ? -1 : mkstemp(tmp.data());
  auto fail = [&](const char* what) {
    const std::string reason = ec ? ec.message() : std::strerror(errno);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
    throw InputError(origin, fmt::format("cannot {} memplan's cache {}: {}", what, target.parent_path().string(), reason),
                     "set XDG_CACHE_HOME to a writable folder");
  };
  if (fd < 0) fail("create a file in");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("write to");
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw InputError(origin, fmt::format("cannot write memplan's cache {}: {}", target.parent_path().string(), std::strerror(errno)),
                     "set XDG_CACHE_HOME to a writable folder");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw InputError(origin, fmt::format("cannot write memplan's cache {}: {}", target.parent_path().string(), reason),
                     "set XDG_CACHE_HOME to a writable folder");
  }
}

}  // namespace

bool is_repo_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= s.size() || s.find('/', slash + 1) != std::string::npos) return false;
  if (s.size() > 200 || s.find("..") != std::string::npos) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == slash) continue;
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return s[0] != '.' && s[slash + 1] != '.' && !detail::ends_with(detail::lower(s), ".json");
}

std::string variant_key(const std::string& repo) {
  const std::string l = detail::lower(repo);
  const size_t slash = l.find('/');
  std::string out = l.substr(0, slash + 1);
  std::string part;
  bool first = true;
  auto flush = [&] {
    if (part != "instruct" && part != "chat" && part != "it" && part != "base") {
      if (!first) out += '-';
      out += part;
      first = false;
    }
    part.clear();
  };
  for (size_t i = slash + 1; i < l.size(); ++i) {
    if (l[i] == '-' || l[i] == '_') flush();
    else part += l[i];
  }
  flush();
  return out;
}

std::string hf_cache_dir() {
  if (const std::string c = env("HF_HUB_CACHE"); !c.empty()) return c;
  if (const std::string c = env("HUGGINGFACE_HUB_CACHE"); !c.empty()) return c;  // huggingface_hub's older name
  const std::string home = hf_home();
  return home.empty() ? "" : home + "/hub";
}

std::optional<std::string> hf_cache_config(const std::string& repo) {
  const std::string root = hf_cache_dir();
  if (root.empty()) return std::nullopt;
  std::string folder = "models--" + repo;
  folder.replace(folder.find('/'), 1, "--");
  const fs::path model = fs::path(root) / folder;
  std::error_code ec;
  const std::string main = read_first_line(model / "refs" / "main");
  if (!main.empty() && main.find('/') == std::string::npos) {
    const fs::path p = model / "snapshots" / main / "config.json";
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  // No refs/main (a download pinned to a revision): the newest snapshot that holds a config.json.
  std::optional<fs::path> best;
  fs::file_time_type best_time{};
  for (const auto& snap : fs::directory_iterator(model / "snapshots", ec)) {
    const fs::path p = snap.path() / "config.json";
    std::error_code e2;
    if (!fs::is_regular_file(p, e2)) continue;
    const auto t = fs::last_write_time(p, e2);
    if (!best || t > best_time) {
      best = p;
      best_time = t;
    }
  }
  if (best) return best->string();
  return std::nullopt;
}

std::string memplan_cache_dir() {
  const std::string c = user_cache_dir();
  return c.empty() ? "" : c + "/memplan";
}

std::string cached_config_path(const std::string& repo) {
  const std::string root = memplan_cache_dir();
  return root.empty() ? "" : (fs::path(root) / "hub" / repo / "config.json").string();
}

std::string fetch_config(const std::string& repo, const Where& origin) {
  const std::string url = endpoint() + "/" + repo + "/resolve/main/config.json";
  std::string why;
  const Curl* curl = load_curl(&why);
  if (!curl)
    throw InputError(origin, fmt::format("cannot fetch '{}' from the Hub: libcurl cannot be loaded ({})", repo, why),
                     "install libcurl4 (apt-get install libcurl4), or download the model's config.json and pass its path "
                     "to --model");
  CURL* h = curl->easy_init();
  if (!h) throw InputError(origin, fmt::format("cannot fetch '{}' from the Hub: curl_easy_init failed", repo),
                           "download config.json yourself and pass it to --model");
  Body body;
  curl_slist* headers = nullptr;
  const std::string tok = token();
  if (!tok.empty()) headers = curl->slist_append(headers, ("Authorization: Bearer " + tok).c_str());
  const long timeout = timeout_seconds();
  const std::string agent = fmt::format("memplan/{}", MEMPLAN_VERSION);
  curl->easy_setopt(h, CURLOPT_URL, url.c_str());
  curl->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl->easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl->easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl->easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
  curl->easy_setopt(h, CURLOPT_CONNECTTIMEOUT, std::min(timeout, 10L));
  curl->easy_setopt(h, CURLOPT_TIMEOUT, timeout);
  curl->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl->easy_setopt(h, CURLOPT_USERAGENT, agent.c_str());
  curl->easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_data);
  curl->easy_setopt(h, CURLOPT_WRITEDATA, &body);
  if (headers) curl->easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  const CURLcode rc = curl->easy_perform(h);
  long status = 0;
  curl->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl->easy_cleanup(h);
  if (headers) curl->slist_free_all(headers);

  const char* offline_hint = "check the network and HF_ENDPOINT; offline, set HF_HUB_OFFLINE=1 and pass a local config.json to --model";
  if (body.too_big)
    throw InputError(origin, fmt::format("the Hub's config.json for '{}' is larger than {} MiB: not a model config", repo, kMaxConfigBytes >> 20),
                     fmt::format("check the id at {}/{}", endpoint(), repo));
  if (rc == CURLE_OPERATION_TIMEDOUT)
    throw InputError(origin, fmt::format("fetching '{}' from the Hub timed out after {} s ({})", repo, timeout, url),
                     std::string(offline_hint) + "; MEMPLAN_HUB_TIMEOUT sets the limit in seconds");
  if (rc != CURLE_OK)
    throw InputError(origin, fmt::format("cannot reach the Hub for '{}': {} ({})", repo, curl->easy_strerror(rc), url), offline_hint);
  if (status == 401 || status == 403)
    throw InputError(origin,
                     fmt::format("the Hub refused '{}' (HTTP {}): the model is gated or private{}", repo, status,
                                 tok.empty() ? " and no token was given" : ", and the token given has no access"),
                     fmt::format("accept the model's terms at {}/{} and set HF_TOKEN to a token with read access (the Hub "
                                 "also answers 401 for an id that does not exist)", endpoint(), repo));
  if (status == 404)
    throw InputError(origin, fmt::format("the Hub has no config.json for '{}' (HTTP 404)", repo),
                     "check the model id (ORG/NAME, as on its model page); memplan models lists the bundled presets");
  if (status != 200)
    throw InputError(origin, fmt::format("the Hub answered HTTP {} for '{}' ({})", status, repo, url), offline_hint);
  // Only a JSON object goes into the cache.
  try {
    const detail::Node root = detail::parse_json(body.text, url);
    if (root.kind != detail::Node::Kind::map) throw InputError(Where::at_file(url), "not a JSON object", "a model's config.json is a JSON object");
  } catch (const InputError& e) {
    throw InputError(origin, fmt::format("the Hub's config.json for '{}' is not a model config: {}", repo, e.message()),
                     fmt::format("check the id at {}/{}", endpoint(), repo));
  }
  const std::string path = cached_config_path(repo);
  if (path.empty())
    throw InputError(origin, "cannot tell where memplan's cache is: neither XDG_CACHE_HOME nor HOME is set",
                     "set XDG_CACHE_HOME to a writable folder");
  write_atomically(path, body.text, origin);
  return path;
}

namespace {
thread_local int no_fetch_depth = 0;
}  // namespace

static thread_local const ModelMapScope* model_map = nullptr;

ModelMapScope::ModelMapScope(std::vector<std::pair<std::string, std::string>> map) : map_(std::move(map)), outer_(model_map) {
  model_map = this;
}
ModelMapScope::~ModelMapScope() { model_map = outer_; }
std::optional<std::string> ModelMapScope::lookup(const std::string& repo) {
  const std::string want = detail::lower(repo);
  for (const ModelMapScope* s = model_map; s; s = s->outer_)
    for (const auto& [id, to] : s->map_)
      if (detail::lower(id) == want) return to;
  return std::nullopt;
}

NoFetchScope::NoFetchScope() { ++no_fetch_depth; }
NoFetchScope::~NoFetchScope() { --no_fetch_depth; }
bool NoFetchScope::active() { return no_fetch_depth > 0; }

std::optional<std::string> cached_config(const std::string& repo) {
  if (auto p = hf_cache_config(repo)) return p;
  const std::string cached = cached_config_path(repo);
  std::error_code ec;
  if (!cached.empty() && fs::is_regular_file(cached, ec)) return cached;
  return std::nullopt;
}

std::string locate_config(const std::string& repo, const Where& origin) {
  if (auto p = cached_config(repo)) return *p;
  const std::string cached = cached_config_path(repo);
  if (truthy(env("HF_HUB_OFFLINE")))
    throw InputError(origin,
                     fmt::format("'{}' is not in the Hugging Face cache ({}) nor in memplan's ({}), and HF_HUB_OFFLINE "
                                 "forbids fetching it", repo, hf_cache_dir(), cached.empty() ? "none" : fs::path(cached).parent_path().string()),
                     fmt::format("download it once (huggingface-cli download {} config.json) or pass a config.json to --model", repo));
  if (NoFetchScope::active())
    throw InputError(origin, fmt::format("'{}' is not in the Hugging Face cache ({}) and --model replaces it: not fetched", repo, hf_cache_dir()),
                     "drop --model to estimate the model the file names");
  return fetch_config(repo, origin);
}

}  // namespace memplan::profiles::hub

namespace memplan::profiles::detail {

ReadModel resolve_hub_model(const std::string& repo, const Where& origin) {
  const std::string path = hub::locate_config(repo, origin);
  Node root;
  try {
    root = parse_json(read_text_file(path), path);
  } catch (const InputError& e) {
    throw InputError(e.where(), fmt::format("the cached config.json of '{}' is malformed: {}", repo, e.message()),
                     fmt::format("delete {} and memplan fetches it again", path));
  }
  ReadModel m = read_hf_config(root, path, repo);
  m.spec.hf_repo = repo;
  return m;
}

}  // namespace memplan::profiles::detail
