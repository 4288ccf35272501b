// Data-driven tests over tests/specs/: every shapes/*.cannl must check cleanly (no warning)
// and print the `# expect: NAME : SHAPE` lines it carries; every errors/*.cannl must fail with
// each `# expect-error: LINE:COL: TEXT` it carries (TEXT a case-insensitive substring of the
// message or of one of its notes), and with no other error; every warnings/*.cannl must check
// with each `# expect-warning: LINE:COL: TEXT` it carries (several lines may name one warning:
// its message, its note) and no other warning. Each file is its own section, reported by name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "driver/commands.h"
#include "driver/frontend.h"
#include "program.h"

using namespace cannl;
namespace fs = std::filesystem;

static std::vector<fs::path> spec_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(CANNL_SOURCE_DIR) / dir))
    if (e.path().extension() == ".cannl") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

static std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

TEST_CASE("shape inference: tests/specs/shapes", "[shapes][specs]") {
  auto files = spec_files("tests/specs/shapes");
  REQUIRE(files.size() >= 60);
  for (const fs::path& f : files) DYNAMIC_SECTION(f.filename().string()) {
    std::string text = test::slurp(f);
    std::ostringstream out, err;
    CheckOptions opt;
    int rc = check_text(f.filename().string(), text, opt, out, err);
    INFO(f.filename().string() << "\n" << err.str());
    CHECK(rc == 0);
    CHECK(err.str().find(": warning: ") == std::string::npos);
    std::istringstream lines(text);
    std::string line, printed = "\n" + out.str();
    int expectations = 0;
    while (std::getline(lines, line)) {
      auto pos = line.find("# expect:");
      if (pos == std::string::npos) continue;
      std::string want = line.substr(pos + 9);
      want.erase(0, want.find_first_not_of(' '));
      while (!want.empty() && (want.back() == ' ' || want.back() == '\r')) want.pop_back();
      ++expectations;
      INFO("expected line: " << want << "\nprinted:\n" << out.str());
      CHECK(printed.find("\n" + want + "\n") != std::string::npos);
    }
    CHECK(expectations > 0);
  }
}

TEST_CASE("diagnostics: tests/specs/errors", "[errors][specs]") {
  auto files = spec_files("tests/specs/errors");
  REQUIRE(files.size() >= 30);
  std::regex expect_re(R"(# expect-error: (\d+):(\d+): (.*))");
  for (const fs::path& f : files) DYNAMIC_SECTION(f.filename().string()) {
    std::string text = test::slurp(f);
    auto fe = run_frontend(f.filename().string(), text);
    std::ostringstream rendered;
    fe->diags.render(rendered);
    INFO(f.filename().string() << "\n" << rendered.str());
    CHECK(!fe->ok());
    std::istringstream lines(text);
    std::string line;
    int expected = 0;
    while (std::getline(lines, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, expect_re)) continue;
      ++expected;
      int want_line = std::stoi(m[1]), want_col = std::stoi(m[2]);
      std::string want_text = lower(m[3]);
      while (!want_text.empty() && (want_text.back() == ' ' || want_text.back() == '\r')) want_text.pop_back();
      bool found = false;
      for (const Diagnostic& d : fe->diags.all()) {
        if (d.severity != Severity::Error) continue;
        LineCol lc = fe->file.line_col(d.range.begin);
        std::string text = d.message;  // with its notes (hints)
        for (const Diagnostic& n : d.notes) text += "\n" + n.message;
        if (lc.line == want_line && lc.col == want_col && lower(text).find(want_text) != std::string::npos)
          found = true;
      }
      INFO("expected " << want_line << ":" << want_col << ": " << want_text);
      CHECK(found);
    }
    CHECK(expected > 0);
    CHECK(fe->diags.error_count() == expected);
  }
}

TEST_CASE("warnings: tests/specs/warnings", "[warnings][specs]") {
  auto files = spec_files("tests/specs/warnings");
  REQUIRE(files.size() >= 1);
  std::regex expect_re(R"(# expect-warning: (\d+):(\d+): (.*))");
  for (const fs::path& f : files) DYNAMIC_SECTION(f.filename().string()) {
    std::string text = test::slurp(f);
    auto fe = run_frontend(f.filename().string(), text);
    std::ostringstream rendered;
    fe->diags.render(rendered);
    INFO(f.filename().string() << "\n" << rendered.str());
    CHECK(fe->ok());
    std::istringstream lines(text);
    std::string line;
    int expected = 0, warnings = 0;
    std::set<std::pair<int, int>> where;  // several lines may name one warning (its message, its note)
    for (const Diagnostic& d : fe->diags.all()) warnings += d.severity == Severity::Warning;
    while (std::getline(lines, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, expect_re)) continue;
      ++expected;
      int want_line = std::stoi(m[1]), want_col = std::stoi(m[2]);
      where.insert({want_line, want_col});
      std::string want_text = lower(m[3]);
      while (!want_text.empty() && (want_text.back() == ' ' || want_text.back() == '\r')) want_text.pop_back();
      bool found = false;
      for (const Diagnostic& d : fe->diags.all()) {
        if (d.severity != Severity::Warning) continue;
        LineCol lc = fe->file.line_col(d.range.begin);
        std::string text = d.message;  // with its notes (the fix)
        for (const Diagnostic& n : d.notes) text += "\n" + n.message;
        if (lc.line == want_line && lc.col == want_col && lower(text).find(want_text) != std::string::npos)
          found = true;
      }
      INFO("expected " << want_line << ":" << want_col << ": " << want_text);
      CHECK(found);
    }
    CHECK(expected > 0);
    CHECK(warnings == static_cast<int>(where.size()));
  }
}

// The language-model specs of contract v1 (specs/gpt_tiny, gpt_char, gpt2_124m and the
// smaller ones of tests/specs/lm): `cannl check` prints exactly tests/specs/lm/NAME.expected
// (for gpt_tiny, the contract's §1 lines among them); GPT-2 small has llm.c's parameter
// count, summed from the checked shapes of `cannl check --json`; `cannl gen` writes C and CUDA.
TEST_CASE("language models: tests/specs/lm", "[specs][lm]") {
  std::vector<fs::path> files = spec_files("tests/specs/lm");
  for (const char* name : {"gpt_tiny", "gpt_char", "gpt2_124m"})
    files.push_back(fs::path(CANNL_SOURCE_DIR) / "specs" / (std::string(name) + ".cannl"));
  for (const fs::path& f : files) DYNAMIC_SECTION(f.filename().string()) {
    std::ostringstream out, err;
    int rc = check_text(f.filename().string(), test::slurp(f), CheckOptions{}, out, err);
    INFO(err.str());
    REQUIRE(rc == 0);
    fs::path expected = fs::path(CANNL_SOURCE_DIR) / "tests/specs/lm" / f.filename();
    expected.replace_extension(".expected");
    REQUIRE(fs::exists(expected));
    CHECK(out.str() == test::slurp(expected));
  }
  std::ostringstream out, err;
  CheckOptions json;
  json.json = true;
  fs::path gpt2 = fs::path(CANNL_SOURCE_DIR) / "specs/gpt2_124m.cannl";
  REQUIRE(check_text("gpt2_124m.cannl", test::slurp(gpt2), json, out, err) == 0);
  long params = 0, blocks = 0;
  for (const auto& t : nlohmann::json::parse(out.str())) {
    if (t["kind"] != "param") continue;
    long n = 1;
    for (const char* part : {"batch", "input", "output"})
      for (const auto& a : t[part]) n *= a.get<long>();
    params += n;
    blocks += t["name"].get<std::string>().rfind("w_qkv.", 0) == 0;
  }
  CHECK(params == 124475904);
  CHECK(blocks == 12);
  // Integer inputs carry their dtype.
  auto tokens = nlohmann::json::parse(out.str())[0];
  CHECK(tokens["name"] == "tokens");
  CHECK(tokens["dtype"] == "int32");
  CHECK(tokens["shape"] == "[batch, 1024 | ]");
  // --dim: a CPU-sized GPT-2.
  std::ostringstream small, serr;
  CheckOptions dims;
  dims.dims = {{"ctx", 64}, {"layers", 2}};
  REQUIRE(check_text("gpt2_124m.cannl", test::slurp(gpt2), dims, small, serr) == 0);
  CHECK(small.str().find("logits : [batch, 64 | 50304]") != std::string::npos);
  CHECK(small.str().find("w_qkv.1 :") != std::string::npos);
  CHECK(small.str().find("w_qkv.2 :") == std::string::npos);
  // gen: C and CUDA, with the attention kernels of the runtime.
  for (const char* target : {"c", "cuda"}) {
    fs::path dir = fs::temp_directory_path() / ("cannl_lm_" + std::to_string(::getpid()));
    GenOptions opt;
    opt.out_dir = dir.string();
    opt.target = target;
    std::ostringstream gout, gerr;
    INFO(gerr.str());
    CHECK(gen_file((fs::path(CANNL_SOURCE_DIR) / "specs/gpt_tiny.cannl").string(), opt, gout, gerr) == 0);
    const std::string src = test::slurp(dir / (std::string("gpt_tiny") + (std::string(target) == "c" ? ".c" : ".cu")));
    CHECK(src.find(std::string(target) == "c" ? "cannl_attention_backward_f32(" : "cannl_attention_backward<real, 32, 32>(") !=
          std::string::npos);
    fs::remove_all(dir);
  }
}
