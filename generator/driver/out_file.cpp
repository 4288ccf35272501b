// out_file.cpp — replacing a file safely (see out_file.h).
#include "driver/out_file.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cannl {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTmp = ".cannl-tmp-";

}  // namespace

std::string why_not_replaceable(const fs::path& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return errno == ENOENT ? "" : std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "is a symbolic link (cannl replaces only regular files: write to its target)";
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "is a device (cannl replaces only regular files)";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO (cannl replaces only regular files)";
  if (S_ISSOCK(st.st_mode)) return "is a socket (cannl replaces only regular files)";
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (st.st_uid != geteuid()) return "belongs to another user (cannl replaces only your own files)";
  return "";
}

bool own_regular_file(const fs::path& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

bool write_new_file(const fs::path& path, const std::string& text, std::string& error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    error = "cannot create " + path.string() + ": " + std::strerror(errno);
    return false;
  }
  const char* p = text.data();
  size_t left = text.size();
  int e = 0;
  while (left > 0 && !e) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) e = n < 0 ? errno : EIO;
    else p += n, left -= static_cast<size_t>(n);
  }
  if (close(fd) != 0 && !e) e = errno;
  if (e) {
    unlink(path.c_str());
    error = std::strerror(e);
    return false;
  }
  return true;
}

std::string tmp_suffix() { return kTmp + std::to_string(getpid()); }

pid_t tmp_pid(const std::string& file) {
  const size_t at = file.rfind(kTmp);
  if (at == std::string::npos || at == 0) return 0;
  const std::string digits = file.substr(at + std::strlen(kTmp));
  if (digits.empty() || digits.size() > 9 || digits[0] == '0' || digits.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return static_cast<pid_t>(std::stol(digits));
}

bool tmp_writer_gone(pid_t pid) { return pid > 0 && (pid == getpid() || (kill(pid, 0) != 0 && errno == ESRCH)); }

bool replace_file(const fs::path& target, const std::string& text, std::string& error) {
  const std::string why = why_not_replaceable(target);
  if (!why.empty()) {
    error = "cannot write " + target.string() + ": it " + why;
    return false;
  }
  const fs::path tmp = target.string() + tmp_suffix();
  std::string reason;
  if (!write_new_file(tmp, text, reason)) {
    error = "cannot write " + target.string() + ": " + reason;
    return false;
  }
  // Checked again just before the rename: what was created meanwhile is not replaced either.
  const std::string why_now = why_not_replaceable(target);
  if (!why_now.empty() || std::rename(tmp.c_str(), target.c_str()) != 0) {
    error = "cannot write " + target.string() + ": " + (why_now.empty() ? std::strerror(errno) : "it " + why_now);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace cannl
