// fuzz_spec.cpp - libFuzzer harness of the spec front end (generator/: lexer, parser, name
// resolution, shape inference, diagnostics): the input is one spec file, checked as
// `cannl check` does (cannl::check_text), diagnostics rendered. Exit status 0 must print every
// tensor's shape; 1 must come with at least one error line carrying file:line:col. Exceptions
// escaping (an InternalError included) are crashes: the front end must report, not throw.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "driver/commands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::ostringstream out, err;
  cannl::CheckOptions opt;
  const int rc = cannl::check_text("fuzz.cannl", text, opt, out, err);
  if (rc == 1 && err.str().find("fuzz.cannl:") == std::string::npos) {
    std::fprintf(stderr, "fuzz_spec: exit status 1 without a located error:\n%s\n", err.str().c_str());
    std::abort();
  }
  if (rc != 0 && rc != 1) {
    std::fprintf(stderr, "fuzz_spec: exit status %d\n%s\n", rc, err.str().c_str());
    std::abort();
  }
  return 0;
}
