// output_dir.h — the transactional writer of `cannl gen -o DIR`.
//
// Takes the output directory, the model's name and the files to write. Guarantees: all the
// files or none: a directory that does not exist is written as a fresh sibling and renamed
// into place (missing parents are created, and removed again on failure); in an existing
// directory each file goes through a temporary renamed over the old one, and files an earlier
// `cannl gen` of this model wrote that this one does not (another target, no --embed now) are
// removed. Every file written begins with the marker line of gen_marker (a model card, JSON,
// with `{` and its `"card"` line), and only a regular file of this user's that begins so is
// ever replaced or removed: a file of the user's where one of ours goes (their CMakeLists.txt),
// a device, FIFO, socket, directory or symbolic link there is an error. (Files of cannl 0.1.0,
// from before the marker, are recognised by their exact header.) On failure one message names
// the file asked for and the reason. Temporaries (out_file.h) of an earlier run that was killed
// (`DIR.cannl-tmp-<pid>/`, `DIR/<file>.cannl-tmp-<pid>`, their process no longer running) are
// removed first: only the files in them that cannl wrote, never a directory recursively.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "emit/c_emit.h"

namespace cannl {

// The first line cannl gen writes into `file` ("// Written by cannl gen." in C, C++ and CUDA
// sources, "# Written by cannl gen." in CMakeLists.txt; "" for a JSON model card).
std::string gen_marker(const std::string& file);

// `others`: files of the model that another run writes into the same directory (the two
// halves of an embedded model, `cannl gen --weights-apart` and `--weights-only`): not removed.
bool write_files(const std::filesystem::path& dir, const std::string& model, const std::vector<OutputFile>& files,
                 std::string& error, const std::set<std::string>& others = {});

}  // namespace cannl
