// write_file_atomically and cache_dir (files.h).
#include "profiles/files.h"
#include "profiles/profiles.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

namespace memplan::profiles {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(const WriteOptions& o, const std::string& path, const std::string& why, const std::string& hint) {
  Where w = o.where;
  if (w.empty()) w = Where::at_file(path);
  throw InputError(w, fmt::format("will not write {} '{}': {}", o.what, path, why), hint);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> input_files(const SetupInputs& in) {
  std::vector<std::pair<std::string, std::string>> out;
  if (in.config) out.emplace_back(*in.config, "--config");
  if (in.calibration) out.emplace_back(*in.calibration, field(Target::calibration).flag);
  if (in.model) out.emplace_back(*in.model, "--model");
  return out;
}

namespace {
struct FilesRead {
  std::mutex mu;
  std::map<std::pair<uint64_t, uint64_t>, std::string> files;  // (device, inode) -> the path it was read by
};
FilesRead& files_read() {
  static FilesRead f;
  return f;
}
}  // namespace

void note_file_read(uint64_t device, uint64_t inode, const std::string& path) {
  FilesRead& f = files_read();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.files.size() < 100000) f.files.emplace(std::make_pair(device, inode), path);
}

void forget_files_read() {
  FilesRead& f = files_read();
  std::lock_guard<std::mutex> lock(f.mu);
  f.files.clear();
}

void check_can_write(const std::string& path, const WriteOptions& opt) {
  if (path.empty()) refuse(opt, path, "the path is empty", "name a file");
  for (const auto& [input, flag] : opt.inputs) {
    std::error_code ec;
    if (!input.empty() && fs::equivalent(path, input, ec) && !ec)
      refuse(opt, path, fmt::format("it is the file given as {}", flag),
             "memplan never replaces a file it reads, --force or not: choose another path");
  }
  if (struct stat target {}; ::stat(path.c_str(), &target) == 0) {
    FilesRead& f = files_read();
    std::string read_as;
    {
      std::lock_guard<std::mutex> lock(f.mu);
      const auto it = f.files.find({static_cast<uint64_t>(target.st_dev), static_cast<uint64_t>(target.st_ino)});
      if (it != f.files.end()) {
        // Still that file under the name it was read by: an inode freed by a deleted file can be
        // given to another, which memplan never read.
        struct stat then {};
        if (::stat(it->second.c_str(), &then) == 0 && then.st_dev == target.st_dev && then.st_ino == target.st_ino) read_as = it->second;
        else f.files.erase(it);
      }
    }
    if (!read_as.empty())
      refuse(opt, path, read_as == path ? "memplan read it for this command" : fmt::format("memplan read it for this command (as '{}')", read_as),
             "memplan never replaces a file it reads, --force or not: choose another path");
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse(opt, path, "it is a folder", "name a file inside it");
    if (!opt.force) {
      if (S_ISLNK(st.st_mode)) refuse(opt, path, "it is a symbolic link", "pass --force to replace the link itself (its target is left alone)");
      if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) refuse(opt, path, "it is read-only", "pass --force to replace it");
      refuse(opt, path, "it exists", "pass --force to replace it, or choose another path");
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) refuse(opt, path, "it is not a regular file", "choose another path");
  }
}

void write_file_atomically(const std::string& path, const std::string& text, const WriteOptions& opt) {
  check_can_write(path, opt);
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) refuse(opt, path, std::strerror(errno), "check that the folder exists and is writable");
  auto fail = [&](const char* why) {
    const std::string reason = why ? why : std::strerror(errno);
    ::close(fd);
    ::unlink(tmpl.c_str());
    refuse(opt, path, reason, "is the disk full, or the folder not writable?");
  };
  ::fchmod(fd, 0644);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(nullptr);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail(nullptr);
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmpl.c_str());
    refuse(opt, path, reason, "is the disk full?");
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmpl.c_str());
    refuse(opt, path, reason, "check that the folder is writable");
  }
}

std::string cache_dir() {
  fs::path base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') base = x;
  else if (const char* h = std::getenv("HOME"); h && *h == '/') base = fs::path(h) / ".cache";
  else
    throw InputError(Where{}, "cannot find the cache folder: neither XDG_CACHE_HOME nor HOME is an absolute path",
                     "set XDG_CACHE_HOME, or pass --out FILE");
  const fs::path dir = base / "memplan";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw InputError(Where::at_file(dir.string()), fmt::format("cannot create the cache folder ({})", ec ? ec.message() : "not a folder"),
                     "set XDG_CACHE_HOME to a writable folder, or pass --out FILE");
  return dir.string();
}

}  // namespace memplan::profiles
