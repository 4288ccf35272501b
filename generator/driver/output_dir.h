// output_dir.h — the transactional writer of `cannl gen -o DIR`.
//
// Takes the output directory, the model's name and the files to write. Guarantees: all the
// files or none: a directory that does not exist is written as a fresh sibling and renamed
// into place (missing parents are created, and removed again on failure); in an existing
// directory each file goes through a temporary renamed over the old one, and files an earlier
// `cannl gen` of this model wrote that this one does not (another target, no --embed now) are
// removed; a file of the same name that cannl did not write (a user's CMakeLists.txt) is never
// replaced or removed: it is an error. On failure one message names the file asked for and the
// reason. Temporaries of an earlier run that was killed (`DIR.cannl-tmp-<pid>/`,
// `DIR/<file>.cannl-tmp-<pid>`, their process no longer running) are removed first.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "emit/c_emit.h"

namespace cannl {

bool write_files(const std::filesystem::path& dir, const std::string& model, const std::vector<OutputFile>& files,
                 std::string& error);

}  // namespace cannl
