// main.cpp — the `cannl` command line: parses options and calls a subcommand.
#include <CLI/CLI.hpp>
#include <iostream>
#include <unistd.h>

#include "driver/commands.h"
#include "driver/version.h"

int main(int argc, char** argv) {
  CLI::App app{"cannl: an ahead-of-time compiler from model specs to plain C and CUDA"};
  app.name("cannl");
  bool version = false;
  app.add_flag("--version", version, "print the version and exit");
  app.require_subcommand(0, 1);

  cannl::CheckOptions check;
  std::string check_spec;
  auto* c = app.add_subcommand("check", "Parse SPEC and infer shapes; print every tensor's shape");
  c->add_option("SPEC", check_spec, "the spec file (.cannl)")->required();
  c->add_flag("--json", check.json, "print the shapes as JSON");
  c->add_option("--dump", check.dump, "print a stage instead: tokens, ast or shapes")
      ->check(CLI::IsMember({"tokens", "ast", "shapes"}));

  std::string gen_spec;
  cannl::GenOptions gen;
  auto* g = app.add_subcommand("gen", "Generate C (or CUDA) source for SPEC into DIR");
  g->add_option("SPEC", gen_spec, "the spec file (.cannl)")->required();
  auto* out_opt = g->add_option("-o,--output", gen.out_dir, "output directory (created if missing)");
  g->add_option("--dtype", gen.dtype, "element type: f32 (default) or f64")
      ->check(CLI::IsMember({"f32", "f64"}));
  g->add_option("--target", gen.target, "back end: c (default; plain C11) or cuda (CUDA C++ and cuBLAS for one NVIDIA GPU)")
      ->check(CLI::IsMember({"c", "cuda"}));
  g->add_option("--max-batch", gen.max_batch, "largest batch the generated code accepts (default 256)")
      ->check(CLI::Range(1L, 1L << 24));
  auto* dump_opt = g->add_option("--dump", gen.dump, "print a stage instead: tokens, ast, shapes, graph or ir")
      ->check(CLI::IsMember({"tokens", "ast", "shapes", "graph", "ir"}));
  g->callback([&] {
    if (!*out_opt && !*dump_opt) throw CLI::RequiredError("-o,--output");
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (version) {
    std::cout << "cannl " << CANNL_VERSION << "\n";
    return 0;
  }
  check.color = isatty(STDERR_FILENO);
  if (*c) return cannl::check_file(check_spec, check, std::cout, std::cerr);
  if (*g) {
    gen.color = check.color;
    return cannl::gen_file(gen_spec, gen, std::cout, std::cerr);
  }
  std::cerr << app.help();
  return 2;
}
