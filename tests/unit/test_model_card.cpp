// Unit tests of the model card (emit/model_card) and SHA-256 (support/sha256).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sstream>

#include "driver/compile.h"
#include "driver/frontend.h"
#include "emit/model_card.h"
#include "program.h"
#include "support/sha256.h"

using namespace cannl;

TEST_CASE("sha256: the FIPS 180-4 examples", "[card]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("model card: interface, counts, arenas, flops per example", "[card]") {
  const std::string text = R"(model t
input x : [4]
input y : [3]
param w : [4 -> 3]
param b : [3]
z = w * x + b
loss = mean(cross_entropy(z, y))
output z
metric acc = accuracy(z, y)
minimize loss with sgd(lr = 0.1)
)";
  ir::Program p = test::program(text, 16);
  CardInfo info;
  info.spec_file = "t.cannl";
  info.spec_text = text;
  auto c = nlohmann::json::parse(model_card(p, info));
  CHECK(c["model"] == "t");
  CHECK(c["spec"]["sha256"] == sha256_hex(text));
  CHECK(c["dtype"] == "float32");
  CHECK(c["max_batch"] == 16);
  CHECK(c["inputs"][0]["name"] == "x");
  CHECK(c["inputs"][0]["shape"] == nlohmann::json::array({4}));
  CHECK(c["inputs"][0]["read_by_forward"] == true);
  CHECK(c["inputs"][1]["read_by_forward"] == false);
  CHECK(c["outputs"][0]["name"] == "z");
  CHECK(c["params"][0]["shape"] == nlohmann::json::array({3, 4}));
  CHECK(c["parameter_count"] == 15);
  CHECK(c["parameter_bytes"] == 60);
  // The layout's (passes/plan_layout.cpp): at -O0 each buffer its own 64-byte aligned bytes.
  CHECK(c["arena_bytes"]["training_state"] == p.layout.training.bytes + p.layout.opt_state.bytes);
  CHECK(c["arena_bytes"]["inference_state"] == p.layout.inference.bytes);
  CHECK(p.layout.inference.bytes > 0);
  CHECK(p.layout.inference.bytes < p.layout.training.bytes);
  // Run-time-sized states: the bytes one example of max_batch adds (a state for fewer takes less).
  CHECK(c["arena_bytes"]["training_state_per_example"] == p.layout.training.example_bytes);
  CHECK(c["arena_bytes"]["inference_state_per_example"] == p.layout.inference.example_bytes);
  CHECK(c["arena_bytes"]["inference_state_params"] == p.layout.inference.state);
  CHECK(p.layout.training.example_bytes > 0);
  CHECK(p.layout.training.example_bytes * p.max_batch <= p.layout.training.bytes);
  // sgd without momentum: an optimiser-state block with nothing in it
  CHECK(c["opt_state_block"]["bytes"] == p.layout.opt_state.bytes);
  CHECK(c["opt_state_block"]["tensors"].empty());
  info.inference_state = false;  // the CUDA target's card: no forward-only state
  CHECK(nlohmann::json::parse(model_card(p, info))["arena_bytes"]["inference_state"].is_null());
  CHECK(nlohmann::json::parse(model_card(p, info))["arena_bytes"]["inference_state_per_example"].is_null());
  CHECK(nlohmann::json::parse(model_card(p, info))["arena_bytes"]["inference_state_params"].is_null());
  CHECK(c["embedded_weights"].is_null());
  bool forward = false;
  for (const auto& r : c["routines"])
    if (r["name"] == "forward") {
      forward = true;
      // z = w * x + b: 4 multiply-adds and 1 add per output, 3 outputs, per example
      CHECK(r["flops_per_example"].get<double>() >= 3 * 4 * 2);
      CHECK(r["flops_at_max_batch"].get<double>() >= 16 * r["flops_per_example"].get<double>());
    }
  CHECK(forward);
  CHECK(c["flops_per_example"]["forward"].get<double>() > 0);
  CHECK(c["flops_per_example"]["train_step"].get<double>() > c["flops_per_example"]["forward"].get<double>());
  bool found_grad = false;
  for (const auto& t : c["tensors"]) found_grad |= t["role"] == "gradient";
  CHECK(found_grad);
}

TEST_CASE("model card: parameter_count counts trainable params, frozen params and buffers apart", "[card]") {
  // As PyTorch would: 5 * 3 + 3 trainable (w, b), 3 * 3 frozen (emb), and the buffers: mean's
  // 5 and batch_norm's running_mean, running_var (3 each) and num_batches_tracked (1).
  const std::string text = R"(model t
input x : [5]
input y : [3]
buffer mean : [5] = zeros
param emb : [3 -> 3] = normal(std = 0.1) frozen
param w : [5 -> 3]
param b : [3]
z = emb * batch_norm(w * (x - mean) + b)
loss = mean(cross_entropy(z, y))
output z
minimize loss with sgd(lr = 0.1)
)";
  CompileOptions o;
  o.max_batch = 4;
  Compiled compiled;
  std::ostringstream err;
  REQUIRE(compile("t.cannl", text, o, compiled, err, false) == 0);
  REQUIRE(compiled.files.back().name == "t.json");
  auto c = nlohmann::json::parse(compiled.files.back().text);
  CHECK(c["parameter_count"] == 18);
  CHECK(c["parameter_bytes"] == 18 * 4);
  CHECK(c["frozen_parameter_count"] == 9);
  CHECK(c["buffer_count"] == 5 + 3 + 3 + 1);
  long all = 0;
  for (const auto& e : c["params"]) all += e["values"].get<long>();
  CHECK(all == 18 + 9 + 12);
}

TEST_CASE("model card: embedded_weights.step is a JSON number", "[card]") {
  const std::string text = R"(model t
input x : [4]
input y : [3]
param w : [4 -> 3]
z = w * x
loss = mean(cross_entropy(z, y))
output z
minimize loss with sgd(lr = 0.1)
)";
  ir::Program p = test::program(text, 4);
  EmbeddedWeights w;
  w.source = "ck.safetensors";
  w.step = "469";
  CardInfo info;
  info.spec_file = "t.cannl";
  info.spec_text = text;
  info.weights = &w;
  auto c = nlohmann::json::parse(model_card(p, info));
  CHECK(c["embedded_weights"]["checkpoint"] == "ck.safetensors");
  CHECK(c["embedded_weights"]["step"].is_number_integer());
  CHECK(c["embedded_weights"]["step"] == 469);
  w.step = "";  // a file without "step" metadata (PyTorch's)
  CHECK(nlohmann::json::parse(model_card(p, info))["embedded_weights"]["step"].is_null());
  w.step = "12x";
  CHECK(nlohmann::json::parse(model_card(p, info))["embedded_weights"]["step"].is_null());
}

TEST_CASE("model card: ids that forward reads through an embedding are read_by_forward", "[card]") {
  // embedding is an opaque step of the IR (a call), not a load: the card must count its
  // operands as the generated <model>_api.forward_reads does.
  const std::string text = R"(model t
dim ctx = 4
input tokens : [ctx |] int
input next : [ctx |] int
param wte : [8 -> 16] = normal(0, 0.02)
logits = wte * embedding(wte, tokens)
loss = mean(cross_entropy(logits, next))
output logits
minimize loss with sgd(lr = 0.1)
)";
  ir::Program p = test::program(text, 4);
  CardInfo info;
  info.spec_file = "t.cannl";
  info.spec_text = text;
  auto c = nlohmann::json::parse(model_card(p, info));
  CHECK(c["inputs"][0]["name"] == "tokens");
  CHECK(c["inputs"][0]["dtype"] == "int32");
  CHECK(c["inputs"][0]["read_by_forward"] == true);
  CHECK(c["inputs"][1]["read_by_forward"] == false);
}
