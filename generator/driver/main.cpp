// main.cpp — the `cannl` command line: parses options and calls a subcommand.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <set>
#include <unistd.h>

#include "driver/commands.h"
#include "driver/version.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write fails and is reported, and the half-written
  // output directory removed, instead of the process being killed by SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"cannl: an ahead-of-time compiler from model specs to plain C and CUDA"};
  app.name("cannl");
  bool version = false;
  app.add_flag("--version", version, "print the version and exit");
  app.require_subcommand(0, 1);

  // A path option followed by another option (`-o --stats`) lacks its value: CLI11 would take
  // the option as the path (a directory named `--stats`).
  const CLI::Validator a_path(
      [](const std::string& v) {
        if (v.empty()) return std::string("expected a path, got an empty one");
        return v.size() > 1 && v[0] == '-'
                   ? "expected a path, found the option '" + v + "' (write ./" + v + " for a file of that name)"
                   : std::string();
      },
      "PATH");

  cannl::CheckOptions check;
  std::string check_spec;
  auto* c = app.add_subcommand("check", "Parse SPEC and infer shapes; print every tensor's shape");
  c->add_option("SPEC", check_spec, "the spec file (.cannl)")->required();
  auto* check_json = c->add_flag("--json", check.json, "print the shapes as JSON");
  c->add_option("--dump", check.dump, "print a stage instead: tokens, ast or shapes")
      ->check(CLI::IsMember({"tokens", "ast", "shapes"}))
      ->excludes(check_json);
  std::vector<std::string> check_dims, gen_dims;
  c->add_option("--dim", check_dims, "NAME=VALUE: use VALUE for the spec's dim NAME (repeatable)")
      ->type_size(1)
      ->allow_extra_args(false);

  std::string gen_spec;
  cannl::GenOptions gen;
  auto* g = app.add_subcommand("gen", "Generate C (or CUDA) source for SPEC into DIR");
  auto* gen_spec_opt = g->add_option("SPEC", gen_spec, "the spec file (.cannl)");
  bool list_passes = false;
  g->add_flag("--passes", list_passes, "list the optimisation passes in the order they run, and exit");
  g->add_option("-O", gen.opt_level, "optimisation level: -O0 (no passes), -O1, -O2 (default)")
      ->check(CLI::Range(0, 2))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // as compilers: the last -O wins
  g->add_option("--disable-pass", gen.disabled_passes,
                "skip the pass NAME (repeatable, or NAME,NAME; see --passes)")
      ->type_size(1)
      ->allow_extra_args(false)  // one NAME per flag: never the SPEC after it
      ->delimiter(',');
  auto* stats_opt = g->add_flag("--stats", gen.stats, "print each routine's buffers, arena bytes, loop nests, FLOPs and bytes moved "
                                    "per call at the max batch, before and after the passes (no files written)");
  g->add_flag("--json", gen.json, "with --stats: print JSON");
  g->add_flag("--time", gen.time_stages, "print each stage's time (front end, lowering, every pass, emission) on stderr");
  g->add_flag("--no-roll", gen.no_roll,
              "expand every repeat block instance by instance, its params unstacked (by default the instances "
              "that lower alike share one body and their params are stacked [count, ...])");
  g->add_flag("--verify-ir", gen.verify_ir,
              "check the loop IR after every stage (ir/verify.h; on in debug builds, or with CANNL_VERIFY_IR=1)");
  auto* out_opt = g->add_option("-o,--output", gen.out_dir, "output directory (created if missing)")->check(a_path);
  g->add_option("--dtype", gen.dtype, "element type: f32 (default) or f64")
      ->check(CLI::IsMember({"f32", "f64"}));
  g->add_option("--target", gen.target, "back end: c (default; plain C11) or cuda (CUDA C++ and cuBLAS for one NVIDIA GPU)")
      ->check(CLI::IsMember({"c", "cuda"}));
  g->add_option("--precision", gen.precision,
                "with --dtype f32: the matrix products' arithmetic: fp32 (default), tf32 (--target cuda: "
                "TF32 tensor cores) or bf16 (bf16 operands, fp32 accumulation: the tensor cores, or on the "
                "C target AVX512_BF16 where the CPU has it, fp32 elsewhere); params, optimiser state and "
                "checkpoints stay fp32")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  g->add_option("--max-batch", gen.max_batch, "largest batch the generated code accepts (default 256)")
      ->check(CLI::Range(1L, 1L << 24));
  g->add_flag("--blas", gen.blas, "contractions call cblas_sgemm/dgemm (OpenBLAS) instead of the generated kernel");
  g->add_option("--quantize", gen.quantize,
                "int8: the inference and decode routines read the weight matrices and embedding tables as "
                "int8 rows with one float scale per row (docs/generated-code.md, \"int8 weights\"); training "
                "stays float")
      ->check(CLI::IsMember({"int8"}));
  g->add_option("--dim", gen_dims, "NAME=VALUE: use VALUE for the spec's dim NAME (repeatable), e.g. a shorter ctx")
      ->type_size(1)
      ->allow_extra_args(false);
  auto* dump_opt = g->add_option("--dump", gen.dump,
                                 "print a stage instead: tokens, ast, shapes, graph, ir (after the passes), "
                                 "ir:STAGE (after lower, routines, autodiff, optimizer or a pass), dot (the "
                                 "training step's tensor graph, Graphviz: forward, backward and update apart) or "
                                 "dot:ROUTINE (one routine's loop nests and buffers with their shapes: init, "
                                 "train_step, forward or eval_metrics)")
      ->check([](const std::string& v) {
        static const std::set<std::string> stages = {"tokens", "ast", "shapes", "graph", "ir", "dot"};
        return stages.count(v) || v.rfind("ir:", 0) == 0 || v.rfind("dot:", 0) == 0
                   ? std::string()
                   : "must be tokens, ast, shapes, graph, ir, ir:STAGE, dot or dot:ROUTINE";
      });
  dump_opt->excludes(stats_opt);
  auto* weights_opt =
      g->add_option("--weights", gen.weights, "a safetensors checkpoint of the model (with --embed)")->check(a_path);
  auto* embed_opt = g->add_flag("--embed", gen.embed,
                                "compile the --weights params into the generated code (<model>_weights.c)");
  auto* name_map_opt = g->add_option("--name-map", gen.name_map,
                                     "the params' names in the --weights file: lines 'cannl_name = pytorch.key' "
                                     "(# comments), as the training and inference programs take it")
                           ->check(a_path);
  auto* apart_opt = g->add_flag("--weights-apart", gen.weights_apart,
                                "the files of --weights CKPT --embed but <model>_weights.c, which --weights-only "
                                "writes: a new checkpoint recompiles that file alone (no checkpoint read)");
  auto* only_opt = g->add_flag("--weights-only", gen.weights_only,
                               "with --weights CKPT --embed: write <model>_weights.c alone, beside the files of "
                               "--weights-apart");
  auto* format_opt =
      g->add_option("--embed-format", gen.embed_format,
                    "how --embed compiles the values in: c (printed arrays in <model>_weights.c), incbin (their "
                    "bytes in <model>_weights.bin, which <model>_weights.c includes with the assembler's .incbin: "
                    "GCC or Clang, ELF), auto (default: incbin above 16 MiB of params)")
          ->check(CLI::IsMember({"auto", "c", "incbin"}));
  format_opt->needs(weights_opt);
  embed_opt->needs(weights_opt);
  weights_opt->needs(embed_opt);
  name_map_opt->needs(weights_opt);
  only_opt->needs(weights_opt);
  apart_opt->excludes(weights_opt);
  apart_opt->excludes(only_opt);
  cannl::PlotOptions plot;
  auto* pl = app.add_subcommand("plot", "Draw the loss and metric curves of a training run's metrics log as SVG");
  pl->add_option("METRICS", plot.log, "the JSONL log a training program wrote (--metrics)")->required();
  pl->add_option("-o,--output", plot.out, "the SVG file to write")->required()->check(a_path);
  pl->add_option("--title", plot.title, "the title above the curves (default: the log's file name)");

  g->callback([&] {
    if (list_passes) return;
    if (!*gen_spec_opt) throw CLI::RequiredError("SPEC");
    if (!*out_opt && !*dump_opt && !gen.stats) throw CLI::RequiredError("-o,--output");
    if (gen.json && !gen.stats) throw CLI::ValidationError("--json", "only with --stats");
    if (gen.embed && gen.target == "cuda") throw CLI::ValidationError("--embed", "only with --target c");
    if (gen.weights_apart && gen.target == "cuda")
      throw CLI::ValidationError("--weights-apart", "only with --target c");
    if (gen.precision == "tf32" && gen.target != "cuda")
      throw CLI::ValidationError("--precision", "tf32 only with --target cuda (the C target: fp32 or bf16)");
    if (gen.precision == "bf16" && gen.blas)
      throw CLI::ValidationError("--precision", "bf16 not with --blas (cblas_sgemm is fp32)");
    if (!gen.precision.empty() && gen.dtype != "f32")
      throw CLI::ValidationError("--precision", "needs --dtype f32 (params and optimiser state in fp32)");
    if (gen.blas && gen.target == "cuda") throw CLI::ValidationError("--blas", "only with --target c (CUDA uses cuBLAS)");
    if (!gen.quantize.empty() && (gen.target == "cuda" || gen.dtype != "f32" || gen.blas))
      throw CLI::ValidationError("--quantize",
                                 "only with --target c, --dtype f32 and the generated kernel (not --blas)");
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    // One line, like every other cannl error.
    std::cerr << "cannl: error: " << e.what() << " (cannl --help, cannl gen --help)\n";
    return 2;
  }
  if (version) {
    std::cout << "cannl " << CANNL_VERSION << "\n";
    return 0;
  }
  check.color = isatty(STDERR_FILENO);
  std::string dim_error;
  for (const std::string& d : check_dims)
    if (!cannl::parse_dim_override(d, check.dims, dim_error)) break;
  for (const std::string& d : gen_dims)
    if (dim_error.empty() && !cannl::parse_dim_override(d, gen.dims, dim_error)) break;
  if (!dim_error.empty()) {
    std::cerr << "cannl: error: " << dim_error << "\n";
    return 2;
  }
  if (*c) return cannl::check_file(check_spec, check, std::cout, std::cerr);
  if (*g) {
    if (list_passes) {
      std::cout << cannl::pass_listing();
      return 0;
    }
    gen.color = check.color;
    return cannl::gen_file(gen_spec, gen, std::cout, std::cerr);
  }
  if (*pl) return cannl::plot_file(plot, std::cerr);
  std::cerr << app.help();
  return 2;
}
