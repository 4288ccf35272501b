// model_card.cpp — <model>.json (see model_card.h).
#include "emit/model_card.h"

#include <nlohmann/json.hpp>
#include <set>

#include "driver/version.h"
#include "ir/stats.h"
#include "support/sha256.h"

namespace cannl {

namespace {

using json = nlohmann::ordered_json;

std::string spec_shape(const ir::Buffer& b) {
  auto colon = b.shape.find(" : ");
  return colon == std::string::npos ? b.shape : b.shape.substr(colon + 3);
}

// Storage-order dims; the batch axis as "batch" unless left out.
json dims(const ir::Buffer& b, bool skip_batch) {
  json a = json::array();
  for (const auto& d : b.dims) {
    if (d.batch && skip_batch) continue;
    if (d.batch) a.push_back("batch");
    else a.push_back(d.size);
  }
  return a;
}

// A checkpoint's "step" metadata (a string in safetensors) as a JSON number; null when it
// is missing or not a non-negative integer.
json step_number(const std::string& step) {
  if (step.empty() || step.size() > 18 || step.find_first_not_of("0123456789") != std::string::npos) return nullptr;
  return std::stoll(step);
}

long per_example(const ir::Buffer& b) {
  long n = 1;
  for (const auto& d : b.dims)
    if (!d.batch) n *= d.size;
  return n;
}

json interface(const ir::Program& p, const std::vector<int>& bufs, const ir::Routine* reader, bool f64) {
  json a = json::array();
  std::set<int> read;
  if (reader)
    for (const auto& s : reader->stmts) {
      if (s.call)  // an opaque step (embedding's gather, attention) reads its operands too
        for (int b : ir::call_reads(*s.call)) read.insert(b);
      std::vector<const ir::Expr*> loads;
      ir::collect_loads(s, loads);
      for (const auto* l : loads) read.insert(l->access.buf);
    }
  for (size_t i = 0; i < bufs.size(); ++i) {
    const auto& b = p.buffers[static_cast<size_t>(bufs[i])];
    json e;
    e["index"] = i;
    e["name"] = b.name;
    e["shape"] = dims(b, true);
    e["spec_shape"] = spec_shape(b);
    e["values_per_example"] = per_example(b);
    e["dtype"] = b.ids > 0 ? "int32" : f64 ? "float64" : "float32";
    if (b.ids > 0) e["ids"] = b.ids;  // ids must lie in [0, ids) (cannl_tensor_info.ids)
    if (reader) e["read_by_forward"] = read.count(bufs[i]) > 0;
    a.push_back(e);
  }
  return a;
}

}  // namespace

std::string model_card(const ir::Program& p, const CardInfo& info) {
  const int elem = info.f64 ? 8 : 4;
  json c;
  c["card"] = "cannl model card 1";
  c["model"] = p.model;
  c["spec"] = {{"file", info.spec_file}, {"sha256", sha256_hex(info.spec_text)}};
  c["generator"] = std::string("cannl ") + CANNL_VERSION;
  c["dtype"] = info.f64 ? "float64" : "float32";
  if (!info.precision.empty()) c["precision"] = info.precision;  // the products' arithmetic
  c["max_batch"] = p.max_batch;
  c["layout"] = "row-major; a batch is n examples back to back (1 <= n <= max_batch), each in storage order "
                "(output axes, then input axes); a param [a -> b] is stored [b, a]";
  c["inputs"] = interface(p, p.inputs, p.routine(ir::RoutineKind::Forward), info.f64);
  c["outputs"] = interface(p, p.outputs, nullptr, info.f64);
  json params = json::array();
  // As PyTorch counts them: the params with a gradient (model.parameters() that require it),
  // the frozen ones, and the buffers (model.buffers(): `buffer` tensors, running statistics).
  long trainable = 0, frozen = 0, buffers = 0;
  for (int b : p.params) {
    const auto& buf = p.buffers[static_cast<size_t>(b)];
    params.push_back({{"name", buf.state_name}, {"shape", dims(buf, false)}, {"spec_shape", spec_shape(buf)},
                      {"values", buf.elements()}});
    if (buf.frozen) params.back()["trainable"] = false;  // a frozen param or a buffer
    if (!buf.frozen) trainable += buf.elements();
    else if (buf.tensor < 0 || info.buffers.count(buf.tensor)) buffers += buf.elements();  // (running stats: no tensor)
    else frozen += buf.elements();
  }
  c["params"] = params;
  c["parameter_count"] = trainable;
  c["parameter_bytes"] = trainable * elem;
  c["frozen_parameter_count"] = frozen;
  c["buffer_count"] = buffers;
  c["loss"] = p.buffers[static_cast<size_t>(p.loss)].name;
  json metrics = json::array();
  for (int m : p.metrics) metrics.push_back(p.buffers[static_cast<size_t>(m)].name);
  c["metrics"] = metrics;
  c["optimizer"] = p.optimizer;
  json inference = nullptr, inference_example = nullptr, inference_params = nullptr;
  if (info.inference_state) {
    inference = p.layout.inference.bytes, inference_example = p.layout.inference.example_bytes;
    // (the arena's prefix, which a state of _infer_create_embedded leaves out: it reads the
    // compiled-in params in place)
    inference_params = p.layout.inference.state;
  }
  // A training state's bytes: its arena, and the C target's optimiser state, an allocation of
  // its own (inside the arena with --target cuda), so that the two targets' figures compare. At
  // max_batch; a state created for a smaller one (<model>_create_batch) takes its per-example
  // bytes fewer for each example less (ir.h Arena: both targets' states are sized so).
  c["arena_bytes"] = {{"training_state", p.layout.training.bytes + p.layout.opt_state.bytes},
                      {"inference_state", inference},
                      {"training_state_per_example", p.layout.training.example_bytes},
                      {"inference_state_per_example", inference_example},
                      {"inference_state_params", inference_params}};
  // The grad block (data-parallel training all-reduces it): each param gradient's place.
  json grad_params = json::array();
  for (int b : p.params)
    if (const int g = p.grad(b); g >= 0)
      grad_params.push_back({{"param", p.buffers[static_cast<size_t>(b)].state_name},
                             {"offset_bytes", p.layout.training.field[static_cast<size_t>(g)] - p.layout.training.grads},
                             {"elements", p.buffers[static_cast<size_t>(g)].elements()}});
  c["grad_block"] = {{"arena_offset_bytes", p.layout.training.grads},
                     {"bytes", p.layout.training.grads_bytes},
                     {"params", grad_params}};
  // The optimiser-state block (the C target; ZeRO-1 shards it by param): each state tensor's place.
  if (const ir::OptBlock& ob = p.layout.opt_state; !ob.field.empty()) {
    json tensors = json::array();
    for (size_t b = 0; b < ob.field.size(); ++b)
      if (ob.field[b] >= 0 && p.buffers[b].stack == 0)  // (a stacked state: its instances' views)
        tensors.push_back({{"name", p.buffers[b].state_name}, {"offset_bytes", ob.field[b]},
                           {"elements", p.buffers[b].elements()}});
    c["opt_state_block"] = {{"bytes", ob.bytes}, {"tensors", tensors}};
  }
  json routines = json::array();
  json per_example;
  for (const auto& r : p.routines) {
    if (!r.io.batch) continue;  // init: no batch, no cost per example
    const ir::RoutineStats one = ir::routine_stats(p, r, 1, elem), two = ir::routine_stats(p, r, 2, elem);
    per_example[r.name()] = two.flops - one.flops;
    const ir::RoutineStats full = ir::routine_stats(p, r, p.max_batch, elem);
    routines.push_back({{"name", r.name()},
                        {"loop_nests", full.loop_nests},
                        {"arena_bytes_at_max_batch", full.arena_bytes},
                        {"flops_per_example", two.flops - one.flops},
                        {"flops_at_max_batch", full.flops},
                        {"bytes_moved_at_max_batch", full.bytes_moved}});
  }
  c["flops_per_example"] = per_example;
  c["routines"] = routines;
  json tensors = json::array();
  for (const auto& b : p.buffers)
    tensors.push_back({{"name", b.name}, {"role", ir::role_name(b.role)}, {"shape", dims(b, false)},
                       {"spec", b.shape}});
  c["tensors"] = tensors;
  if (info.weights)
    c["embedded_weights"] = {{"checkpoint", info.weights->source}, {"step", step_number(info.weights->step)}};
  else if (info.embedded)  // <model>_weights.c written apart (cannl gen --weights-only): unknown here
    c["embedded_weights"] = {{"checkpoint", nullptr}, {"step", nullptr}};
  else
    c["embedded_weights"] = nullptr;
  // int8 weights (cannl gen --quantize int8; passes/quantize.h): what the forward-only state's
  // routines read of each param, in bytes, and the total against the float params'.
  if (p.int8_bytes > 0) {
    json weights = json::array();
    long total = 0, floats = 0;
    for (int b : p.params) {
      const auto& buf = p.buffers[static_cast<size_t>(b)];
      const long n = buf.elements();
      json w = {{"name", buf.state_name}};
      long bytes = n * elem;
      if (buf.int8_row > 0) {
        const long rows = n / buf.int8_row;
        bytes = n + rows * 4;
        w["int8_rows"] = {rows, buf.int8_row};
        w["int8_bytes"] = n;
        w["scale_bytes"] = rows * 4;
      }
      w["bytes"] = bytes;
      total += bytes;
      floats += n * elem;
      weights.push_back(w);
    }
    c["quantized"] = {{"scheme", "int8 rows, one float32 scale per row: scale = max|w| / 127, q = round(w / scale)"},
                      {"weights", weights},
                      {"bytes", total},
                      {"float_bytes", floats}};
  }
  return c.dump(2) + "\n";
}

}  // namespace cannl
