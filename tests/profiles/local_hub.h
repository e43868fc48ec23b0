// A real HTTP server on 127.0.0.1 (an ephemeral port) that answers the Hub's URL layout,
// /ORG/NAME/resolve/main/config.json, for the Hub client's tests: the client under test talks to
// it through HF_ENDPOINT with libcurl, as it would to huggingface.co. Plain HTTP/1.1, one request
// per connection, served on its own thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace memplan::testing {

class LocalHub {
 public:
  struct Route {
    int status = 200;
    std::string body;
    std::string token;  // when set, answers 401 unless "Authorization: Bearer <token>" is sent
    int delay_ms = 0;   // waits before answering (timeouts)
  };

  LocalHub() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LocalHub() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  // Serves `body` (with `status`) at /<repo>/resolve/main/config.json.
  void add(const std::string& repo, Route r) {
    std::lock_guard<std::mutex> lock(mu_);
    routes_["/" + repo + "/resolve/main/config.json"] = std::move(r);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      ++requests_;
      const size_t sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
      const std::string path = sp1 == std::string::npos || sp2 == std::string::npos ? "" : req.substr(sp1 + 1, sp2 - sp1 - 1);
      Route r{404, "{\"error\":\"Entry not found\"}", "", 0};
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = routes_.find(path); it != routes_.end()) r = it->second;
      }
      if (!r.token.empty() && req.find("Authorization: Bearer " + r.token + "\r\n") == std::string::npos)
        r = {401, "{\"error\":\"Access to model is restricted. You must have access to it and be authenticated.\"}", "", 0};
      if (r.delay_ms > 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(r.delay_ms);
        while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      const std::string reply = "HTTP/1.1 " + std::to_string(r.status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" + r.body;
      ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::map<std::string, Route> routes_;
  std::thread thread_;
};

// Sets environment variables for one test and restores them after.
class EnvGuard {
 public:
  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }
  ~EnvGuard() {
    for (const auto& [name, old] : saved_) {
      if (old.first) ::setenv(name.c_str(), old.second.c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  void remember(const char* name) {
    if (saved_.count(name)) return;
    const char* v = std::getenv(name);
    saved_[name] = {v != nullptr, v ? v : ""};
  }
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

// A fresh folder under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "memplan-hub-XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace memplan::testing
