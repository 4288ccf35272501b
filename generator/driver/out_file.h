// out_file.h — how the `cannl` command replaces a file (`cannl plot -o`, each file of `cannl gen -o`).
//
// Takes a target path. Guarantees: what is replaced is never anything but a regular file of
// this user's: a target that is a directory, a device, a FIFO, a socket or a symbolic link, or
// that belongs to another user, is refused with the reason (as root, `-o /dev/null` would
// otherwise replace the device with a file). The bytes go to a temporary beside the target,
// `<target>.cannl-tmp-<pid>`, created with O_CREAT | O_EXCL | O_NOFOLLOW (a file or link
// planted under that name makes the write fail, it never redirects it), then renamed over it.
#pragma once

#include <filesystem>
#include <string>
#include <sys/types.h>

namespace cannl {

// "" when `path` may be replaced: nothing is there, or a regular file this user owns;
// otherwise why not ("is a FIFO", "is a symbolic link", ...). Symbolic links are not followed.
std::string why_not_replaceable(const std::filesystem::path& path);

// `path` (lstat) is a regular file this user owns.
bool own_regular_file(const std::filesystem::path& path);

// Creates `path`, which must not exist (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0666 less the
// umask), holding `text`; false with the reason in `error` otherwise (nothing left behind;
// "cannot create PATH: ..." when the file could not be created).
bool write_new_file(const std::filesystem::path& path, const std::string& text, std::string& error);

// The suffix of this process's temporaries, ".cannl-tmp-<pid>".
std::string tmp_suffix();

// The pid of a temporary's name `<name>.cannl-tmp-<pid>`, or 0 for another name.
pid_t tmp_pid(const std::string& file);

// The process that wrote a temporary is gone (not merely someone else's: kill answers EPERM
// for those), or is this one (a pid reused, as PID 1 in a new container: it has written nothing).
bool tmp_writer_gone(pid_t pid);

// Writes `text` to `target` through a temporary renamed over it, after why_not_replaceable;
// false with "cannot write TARGET: reason" in `error` otherwise (the target untouched).
bool replace_file(const std::filesystem::path& target, const std::string& text, std::string& error);

}  // namespace cannl
