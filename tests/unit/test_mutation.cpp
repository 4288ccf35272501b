// Random-mutation smoke test: thousands of byte-level mutations of the example specs must
// each end with exit status 0 or 1, and a diagnostic whenever the status is 1 — never an
// exception, crash or hang (the suite also runs under ASan/UBSan).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <unistd.h>

#include "driver/commands.h"

using namespace cannl;
namespace fs = std::filesystem;

static std::string mutate(std::string s, std::mt19937_64& rng) {
  static const std::string alphabet =
      "abcxyz_019.,;:=+-*/|()[]\"#\n\t ->..._e$@\x01\xff\xc3\xa9";
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits; ++i) {
    size_t pos = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 6) {
      case 0: if (!s.empty()) s.erase(pos, 1 + rng() % 3); break;
      case 1: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      case 2: if (!s.empty()) s[pos] = alphabet[rng() % alphabet.size()]; break;
      case 3: {  // duplicate a span
        size_t len = 1 + rng() % 20;
        s.insert(pos, s.substr(pos, len));
        break;
      }
      case 4: {  // move a span elsewhere
        size_t len = 1 + rng() % 30;
        std::string span = s.substr(pos, len);
        s.erase(pos, len);
        s.insert(s.empty() ? 0 : rng() % (s.size() + 1), span);
        break;
      }
      case 5: if (!s.empty()) s.resize(pos); break;  // truncate
    }
  }
  return s;
}

// The texts of specs/*.cannl (or of another folder's), in file-name order (a fixed seed
// gives fixed mutants).
static std::vector<std::string> example_specs(const char* folder = "specs") {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(fs::path(CANNL_SOURCE_DIR) / folder))
    if (e.path().extension() == ".cannl") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> texts;
  for (const auto& p : paths) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    texts.push_back(ss.str());
  }
  return texts;
}

// The mutants each test runs: `wanted`, or fewer when CANNL_MUTATION_RUNS=N caps it (the asan
// preset's tests: the generator under the sanitizers is several times slower; release runs all).
static int mutation_runs(int wanted) {
  const char* cap = std::getenv("CANNL_MUTATION_RUNS");
  if (!cap || !*cap) return wanted;
  return std::clamp(std::atoi(cap), 1, wanted);
}

TEST_CASE("mutated specs never crash", "[mutation]") {
  const std::vector<std::string> seeds = example_specs();
  REQUIRE(!seeds.empty());
  std::mt19937_64 rng(20261121);
  const int runs = mutation_runs(5000);
  int ok = 0, rejected = 0;
  for (int i = 0; i < runs; ++i) {
    std::string text = mutate(seeds[i % seeds.size()], rng);
    std::ostringstream out, err;
    int rc = -1;
    try {
      rc = check_text("mutant.cannl", text, CheckOptions{}, out, err);
    } catch (const std::exception& ex) {
      FAIL("exception on mutant " << i << ": " << ex.what() << "\n" << text);
    }
    INFO("mutant " << i << ":\n" << text << "\n--- stderr:\n" << err.str());
    REQUIRE((rc == 0 || rc == 1));
    if (rc == 1) {
      REQUIRE(err.str().find("error") != std::string::npos);
      ++rejected;
    } else {
      ++ok;
    }
  }
  // Both outcomes must occur, or the mutator is not exercising the front end.
  CHECK(ok > 0);
  CHECK(rejected > runs / 2);
}

// The same for the whole generator: mutants that check cleanly go on through lowering,
// autodiff, the passes and both back ends, and must end with 0 or 1 — a spec the front end
// accepts must never crash a later stage. A rejected spec leaves no output directory.
TEST_CASE("mutated specs never crash the generator", "[mutation]") {
  const std::vector<std::string> seeds = example_specs();
  REQUIRE(!seeds.empty());
  fs::path dir = fs::temp_directory_path() / ("cannl_mutation_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937_64 rng(20261122);
  const int runs = mutation_runs(1500);
  int generated = 0;
  for (int i = 0; i < runs; ++i) {
    std::string text = mutate(seeds[i % seeds.size()], rng);
    std::ostringstream out, err;
    if (check_text("mutant.cannl", text, CheckOptions{}, out, err) != 0) continue;
    fs::path spec = dir / "mutant.cannl";
    std::ofstream(spec, std::ios::binary) << text;
    for (const char* target : {"c", "cuda"}) {
      GenOptions opt;
      opt.target = target;
      opt.out_dir = (dir / "out").string();
      fs::remove_all(opt.out_dir);
      std::ostringstream gout, gerr;
      int rc = -1;
      try {
        rc = gen_file(spec.string(), opt, gout, gerr);
      } catch (const std::exception& ex) {
        FAIL("exception on mutant " << i << ": " << ex.what() << "\n" << text);
      }
      INFO("mutant " << i << " (" << target << "):\n" << text << "\n--- stderr:\n" << gerr.str());
      REQUIRE((rc == 0 || rc == 1));
      if (rc == 1) {
        REQUIRE(gerr.str().find("error") != std::string::npos);
        REQUIRE(!fs::exists(opt.out_dir));
      } else {
        ++generated;
      }
    }
  }
  fs::remove_all(dir);
  CHECK(generated > runs / 15);  // 100 of 1500
}

// The language-model specs (contract v1: int inputs, embeddings, attention, repeat blocks):
// mutants through check and gen end with 0 or 1, a diagnostic, and no output directory when
// rejected.
TEST_CASE("mutated language-model specs never crash", "[mutation]") {
  std::vector<std::string> seeds = example_specs("tests/specs/lm");
  for (const std::string& s : example_specs())  // specs/gpt_tiny, gpt_char, gpt2_124m, llama_char, speedrun_char
    if (s.find("input tokens : [ctx |] int") != std::string::npos) seeds.push_back(s);
  REQUIRE(seeds.size() >= 4);
  fs::path dir = fs::temp_directory_path() / ("cannl_mutation_lm_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937_64 rng(20261123);
  const int runs = mutation_runs(1500);
  int accepted = 0, generated = 0;
  for (int i = 0; i < runs; ++i) {
    std::string text = mutate(seeds[i % seeds.size()], rng);
    std::ostringstream out, err;
    int rc = -1;
    try {
      rc = check_text("mutant.cannl", text, CheckOptions{}, out, err);
    } catch (const std::exception& ex) {
      FAIL("exception on mutant " << i << ": " << ex.what() << "\n" << text);
    }
    INFO("mutant " << i << ":\n" << text << "\n--- stderr:\n" << err.str());
    REQUIRE((rc == 0 || rc == 1));
    if (rc == 1) REQUIRE(err.str().find("error") != std::string::npos);
    if (rc != 0) continue;
    if (accepted++ % 5) continue;  // gen on every fifth accepted mutant (not every fifth seed's)
    fs::path spec = dir / "mutant.cannl";
    std::ofstream(spec, std::ios::binary) << text;
    GenOptions opt;
    opt.out_dir = (dir / "out").string();
    fs::remove_all(opt.out_dir);
    std::ostringstream gout, gerr;
    try {
      rc = gen_file(spec.string(), opt, gout, gerr);
    } catch (const std::exception& ex) {
      FAIL("exception on mutant " << i << ": " << ex.what() << "\n" << text);
    }
    INFO("gen:\n" << gerr.str());
    REQUIRE((rc == 0 || rc == 1));
    if (rc == 1) REQUIRE(!fs::exists(opt.out_dir));
    generated += rc == 0;
  }
  fs::remove_all(dir);
  CHECK(accepted > runs / 15);  // 100 of 1500
  CHECK(generated > runs / 150);
}
