// program.h — the loop IR of a spec for the unit tests: the pipeline of driver/compile.h run
// up to the passes of `level` (0: lowered, differentiated, optimised, loops ordered; no
// optimisation pass).
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "driver/compile.h"

namespace cannl::test {

// The whole of a file (empty if it cannot be read: the test's comparison then fails).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline ir::Program program(const std::string& text, long max_batch = 256, int level = 0,
                           const std::string& path = "t.cannl", const std::string& target = "c") {
  CompileOptions o;
  o.target = target;  // its layout (passes/plan_layout.cpp)
  o.max_batch = max_batch;
  o.opt_level = level;
  o.emit = false;
  Compiled c;
  std::ostringstream err;
  const int rc = compile(path, text, o, c, err, false);
  INFO(err.str());
  REQUIRE(rc == 0);
  return std::move(c.prog);
}

}  // namespace cannl::test
