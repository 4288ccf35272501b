// test_quantize.cpp — passes/quantize.h: which params the forward-only state reads as int8 rows,
// the int8 block's layout, the scheme's rounding, and what the C emitter and the card print.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "driver/compile.h"
#include "passes/quantize.h"

namespace cannl {

namespace {

const char* kSpec = R"(model qt
input x : [32]
input y : [32]
param w1 : [32 -> 64]
param b1 : [64]
param w2 : [64 -> 32]
param w3 : [64 -> 10]
h = relu(w1 * x + b1)
z = w2 * h
loss = mean(cross_entropy(z, y)) + 0.01 * mean(w3 *. w3)
output z
minimize loss with sgd(lr = 0.1)
)";

// A rolled repeat block: w's instances are product operands in the bodies, g's are not.
const char* kRolled = R"(model qr
input x : [64]
input y : [64]
h = x
repeat 3 carry h
  param w : [64 -> 64]
  param g : [64] = ones
  h = relu(w * h) *. g
end
z = h
loss = mean(cross_entropy(z, y))
output z
minimize loss with sgd(lr = 0.1)
)";

Compiled gen(const std::string& quantize, const char* spec = kSpec) {
  CompileOptions o;
  o.max_batch = 4;
  o.quantize = quantize;
  Compiled c;
  std::ostringstream err;
  const int rc = compile(spec == kSpec ? "qt.cannl" : "qr.cannl", spec, o, c, err, false);
  INFO(err.str());
  REQUIRE(rc == 0);
  return c;
}

const std::string& file(const Compiled& c, const std::string& name) {
  for (const auto& f : c.files)
    if (f.name == name) return f.text;
  FAIL("no file " << name);
  static std::string none;
  return none;
}

}  // namespace

TEST_CASE("quantize: the products' weights become int8 rows, the rest stays float", "[quantize]") {
  const Compiled c = gen("int8");
  const ir::Program& p = c.prog;
  auto row = [&](const char* n) { return p.buffers[static_cast<size_t>(p.find(n))].int8_row; };
  CHECK(row("w1") == 32);  // [64, 32]: rows of the 32 inputs each output sums over
  CHECK(row("w2") == 64);
  CHECK(row("b1") == 0);   // a bias: read pointwise
  CHECK(row("w3") == 0);   // read pointwise by the loss (eval_metrics)
  // The block: w1's rows then its scales, then w2's, each part 64-byte aligned.
  CHECK(p.buffers[static_cast<size_t>(p.find("w1"))].int8_at == 0);
  CHECK(p.buffers[static_cast<size_t>(p.find("w2"))].int8_at == 2048 + 256);
  CHECK(p.int8_bytes == 2048 + 256 + 2048 + 128);
  // Printed: the inference state's products, not the training state's; the card's bytes.
  CHECK(file(c, "qt_inference.c").find("cannl_sgemm_q8(m->gemm") != std::string::npos);
  CHECK(file(c, "qt_inference.c").find("cannl_quantize_rows_q8(m->w1, 64, 32, m->int8.w1, m->int8_scale.w1)") !=
        std::string::npos);
  CHECK(file(c, "qt.c").find("cannl_sgemm_q8") == std::string::npos);
  CHECK(file(c, "qt.h").find("#define QT_INT8_ROWS { 32, 0, 64, 0 }") != std::string::npos);
  const auto card = nlohmann::json::parse(file(c, "qt.json"));
  CHECK(card["quantized"]["bytes"] == (64 * 32 + 64 * 4) + 64 * 4 + (32 * 64 + 32 * 4) + 10 * 64 * 4);
  CHECK(card["quantized"]["float_bytes"] == (64 * 32 + 64 + 32 * 64 + 10 * 64) * 4);
}

TEST_CASE("quantize: a rolled block's stacked weights are int8 instance by instance, its calls given each one's rows",
          "[quantize][roll]") {
  const Compiled c = gen("int8", kRolled);
  const ir::Program& p = c.prog;
  REQUIRE(p.blocks.size() == 1);  // still rolled
  auto row = [&](const char* n) { return p.buffers[static_cast<size_t>(p.find(n))].int8_row; };
  CHECK(row("w") == 64);  // the stacked storage
  for (const char* n : {"w_0", "w_1", "w_2"}) CHECK(row(n) == 64);
  for (const char* n : {"g", "g_0", "g_2"}) CHECK(row(n) == 0);
  // each instance's rows then its scales, one after the other
  CHECK(p.buffers[static_cast<size_t>(p.find("w_1"))].int8_at == 4096 + 256);
  CHECK(p.int8_bytes == 3 * (4096 + 256));
  const std::string& inf = file(c, "qr_inference.c");
  CHECK(inf.find("int8_t *w[3];") != std::string::npos);
  CHECK(inf.find("const int8_t *restrict w_int8,\n    const float *restrict w_int8_scale,") != std::string::npos);
  CHECK(inf.find("cannl_sgemm_q8(m->gemm, n, 64, 64, 1.0f, h_in, 64, 1, w_int8, 64, w_int8_scale,") !=
        std::string::npos);
  CHECK(inf.find("m->int8.w[cannl_l], m->int8_scale.w[cannl_l],") != std::string::npos);
  CHECK(inf.find("cannl_quantize_rows_q8((m->w + 4096), 64, 64, m->int8.w[1], m->int8_scale.w[1]);") !=
        std::string::npos);
  CHECK(file(c, "qr.h").find("#define QR_INT8_ROWS { 64, 64, 64, 0, 0, 0 }") != std::string::npos);
  CHECK(file(c, "qr.c").find("int8") == std::string::npos);  // the training state: float
}

TEST_CASE("quantize: without --quantize nothing is int8 and the card has no quantized key", "[quantize]") {
  const Compiled c = gen("");
  CHECK(c.prog.int8_bytes == 0);
  for (const auto& b : c.prog.buffers) CHECK(b.int8_row == 0);
  CHECK(file(c, "qt_inference.c").find("int8") == std::string::npos);
  CHECK(!nlohmann::json::parse(file(c, "qt.json")).contains("quantized"));
}

TEST_CASE("quantize_rows_q8: scale max|w| / 127, halves away from zero, zero rows", "[quantize]") {
  std::vector<int8_t> q;
  std::vector<float> s;
  quantize_rows_q8({0.0f, 1.0f, -2.0f, 0.5f, 0, 0, 0, 0}, 2, 4, q, s);
  CHECK(s[0] == 2.0f / 127.0f);
  CHECK(s[1] == 0.0f);
  CHECK(q == std::vector<int8_t>{0, 64, -127, 32, 0, 0, 0, 0});  // 63.5 -> 64, 31.75 -> 32
}

}  // namespace cannl
