// output_dir.cpp — the transactional writer of `cannl gen -o DIR` (see output_dir.h).
#include "driver/output_dir.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace cannl {

namespace fs = std::filesystem;

namespace {

// Writes `text` to `path`; an error names `shown` (the file the user asked for, not its
// temporary) and the reason.
bool write_text(const fs::path& path, const std::string& text, const fs::path& shown, std::string& error) {
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f) {
    error = "cannot write " + shown.string() + (errno ? std::string(": ") + std::strerror(errno) : std::string());
    return false;
  }
  return true;
}

constexpr const char* kTmp = ".cannl-tmp-";

// The pid of a temporary `<name>.cannl-tmp-<pid>`, or 0 for another name.
pid_t tmp_pid(const std::string& file) {
  const size_t at = file.rfind(kTmp);
  if (at == std::string::npos || at == 0) return 0;
  const std::string digits = file.substr(at + std::strlen(kTmp));
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return static_cast<pid_t>(std::stol(digits));
}

// The process is gone (not merely someone else's: kill answers EPERM for those).
bool gone(pid_t pid) { return pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH; }

// Temporaries that an earlier `cannl gen` into `dir` left when it was killed: the sibling
// directory `<dir>.cannl-tmp-<pid>` and files `<dir>/<file>.cannl-tmp-<pid>`, of processes
// that no longer run. (A running gen's are its own business.)
void remove_stale_temporaries(const fs::path& dir) {
  std::error_code ec;
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const std::string base = dir.filename().string() + kTmp;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(base, 0) == 0 && gone(tmp_pid(name))) fs::remove_all(it->path(), ec);
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (gone(tmp_pid(name))) fs::remove(it->path(), ec);
  }
}

}  // namespace

bool write_files(const fs::path& dir, const std::string& model, const std::vector<OutputFile>& files,
                 std::string& error) {
  std::error_code ec;
  const std::string tag = kTmp + std::to_string(getpid());
  remove_stale_temporaries(dir);
  if (!fs::exists(dir, ec)) {
    // Missing parents are created as `mkdir -p` would, and removed again if anything fails.
    fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    fs::path created;  // the outermost parent this call creates
    for (fs::path p = parent; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) created = p;
    if (!created.empty() && !fs::create_directories(parent, ec)) {
      error = "cannot create " + parent.string() + ": " + ec.message();
      fs::remove_all(created, ec);
      return false;
    }
    if (!fs::is_directory(parent, ec)) {
      error = "cannot write into " + parent.string() + ": not a directory";
      return false;
    }
    auto undo = [&](const fs::path& tmp) {
      fs::remove_all(tmp, ec);
      if (!created.empty()) fs::remove_all(created, ec);
    };
    fs::path tmp = dir.string() + tag;
    fs::remove_all(tmp, ec);
    if (!fs::create_directory(tmp, ec)) {
      error = "cannot create " + tmp.string() + ": " + ec.message();
      undo(tmp);
      return false;
    }
    for (const auto& f : files)
      if (!write_text(tmp / f.name, f.text, dir / f.name, error)) {
        undo(tmp);
        return false;
      }
    fs::rename(tmp, dir, ec);
    if (ec) {
      error = "cannot rename " + tmp.string() + " to " + dir.string() + ": " + ec.message();
      undo(tmp);
      return false;
    }
    return true;
  }
  if (!fs::is_directory(dir, ec)) {
    error = dir.string() + " exists and is not a directory";
    return false;
  }
  std::vector<fs::path> written;
  auto cleanup = [&] {
    for (const auto& w : written) fs::remove(w, ec);
  };
  for (const auto& f : files) {
    fs::path tmp = dir / (f.name + tag);
    if (!write_text(tmp, f.text, dir / f.name, error)) {
      cleanup();
      fs::remove(tmp, ec);
      return false;
    }
    written.push_back(tmp);
  }
  for (const auto& f : files) {
    fs::rename(dir / (f.name + tag), dir / f.name, ec);
    if (ec) {
      error = "cannot replace " + (dir / f.name).string() + ": " + ec.message();
      cleanup();
      return false;
    }
  }
  // Files an earlier `cannl gen` of this model wrote that this one does not (another target,
  // no --embed now): left behind, they would describe another build.
  for (const char* suffix : {".h", ".c", "_inference.c", "_train.c", "_infer.c", ".json", "_weights.c", ".cu",
                             "_train.cu"}) {
    const std::string name = model + suffix;
    bool ours = false;
    for (const auto& f : files) ours = ours || f.name == name;
    if (!ours) fs::remove(dir / name, ec);
  }
  return true;
}

}  // namespace cannl
