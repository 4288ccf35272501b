// The back half of the generator on small specs: lowering to loop nests, autodiff, the
// optimiser nests, loop ordering and the C emitter's output (as text).
#include <catch2/catch.hpp>

#include <set>

#include "autodiff/autodiff.h"
#include "driver/frontend.h"
#include "emit/c_emit.h"
#include "ir/ir_print.h"
#include "ir/prims.h"
#include "program.h"

using namespace cannl;

namespace {

struct Gen {
  ir::Program p;
  explicit Gen(const std::string& body, long max_batch = 256) : p(test::program("model t\n" + body, max_batch)) {}
  std::string routine(ir::RoutineKind kind) const {
    std::string s;
    for (const auto& st : p.routine(kind)->stmts) s += ir::print_stmt(st, p) + "\n";
    return s;
  }
  const ir::Buffer& buf(const std::string& name) const {
    int i = p.find(name);
    REQUIRE(i >= 0);
    return p.buffers[static_cast<size_t>(i)];
  }
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const char* kMlp = R"(input x : [4]
input y : [3]
param w : [4 -> 3]
param b : [3]
z = w * x + b
loss = mean(cross_entropy(z, y))
output z
metric acc = accuracy(z, y)
minimize loss with sgd(lr = 0.1, momentum = 0.9)
)";

}  // namespace

TEST_CASE("buffers are stored batch, output, input", "[lower]") {
  Gen g(kMlp, 64);
  CHECK(g.buf("w").dims == std::vector<ir::Dim>{{3, false}, {4, false}});
  CHECK(g.buf("x").dims == std::vector<ir::Dim>{{64, true}, {4, false}});
  CHECK(g.buf("loss").dims.empty());
  CHECK(g.buf("w").role == ir::Role::Param);
  CHECK(g.buf("w").state_name == "w");
  CHECK(g.buf("w_momentum_buffer").state_name == "w.momentum_buffer");
  // what a checkpoint holds: params and optimiser state, each name once, no gradients
  std::set<std::string> names;
  for (const auto& b : g.p.buffers)
    if (!b.state_name.empty()) CHECK(names.insert(b.state_name).second);
  CHECK(names == std::set<std::string>{"w", "b", "w.momentum_buffer", "b.momentum_buffer"});
}

TEST_CASE("a matrix product is a fill and an accumulation -- pointwise parts are inline", "[lower]") {
  Gen g(kMlp);
  std::string fwd = g.routine(ir::RoutineKind::Forward);
  CHECK(has(fwd, "z_mm[b, o] = 0"));
  CHECK(has(fwd, "z_mm[b, o] += w[o, k] * x[b, k]"));
  CHECK(has(fwd, "z[b, o] = z_mm[b, o] + b[o]"));
  // forward computes only what the outputs need
  CHECK_FALSE(has(fwd, "loss"));
  CHECK(has(g.routine(ir::RoutineKind::Eval), "acc[] +="));
}

TEST_CASE("autodiff: one nest per read, in reverse, gradients zeroed first", "[autodiff]") {
  Gen g(kMlp);
  std::string t = g.routine(ir::RoutineKind::TrainStep);
  CHECK(has(t, "loss_grad[] = 1"));
  CHECK(has(t, "w_grad[j0, j1] = 0"));
  // the bias broadcasts over the batch: its gradient sums over it
  CHECK(has(t, "b_grad[o] += z_grad[b, o]"));
  CHECK(has(t, "w_grad[o, k] += z_mm_grad[b, o] * x[b, k]"));
  // no gradient flows into data
  CHECK(g.p.find("x_grad") < 0);
  CHECK(g.p.find("y_grad") < 0);
  // the shift by the maximum is a constant for autodiff
  CHECK(g.p.find("loss_max_grad") < 0);
  CHECK(t.find("loss_grad[] = 1") < t.find("w_grad[o, k] +="));
}

TEST_CASE("derivative rules", "[autodiff]") {
  ir::Access a{0, {ir::Affine::of(0)}}, b{1, {ir::Affine::of(0)}};
  auto A = ir::load(a), B = ir::load(b);
  ir::Program p;
  p.buffers.resize(2);
  p.buffers[0].name = "a";
  p.buffers[1].name = "b";
  p.buffers[0].dims = p.buffers[1].dims = {{4, false}};
  std::vector<ir::Iter> it = {{"i", 4, false}};
  auto d = [&](ir::ExprP e, const ir::Access& wrt) { return ir::print_expr(*derivative(e, wrt), p, it); };
  CHECK(d(ir::binary(ir::Op::Mul, A, B), a) == "b[i]");
  CHECK(d(ir::binary(ir::Op::Div, A, B), b) == "-(a[i] / (b[i] * b[i]))");
  CHECK(d(ir::call("relu", {A}), a) == "step(a[i])");
  CHECK(d(ir::call("exp", {A}), a) == "exp(a[i])");
  CHECK(d(ir::pow(A, 3), a) == "3 * a[i] ** 2");
  CHECK(d(ir::call("tanh", {A}), a) == "1 - tanh(a[i]) * tanh(a[i])");
  CHECK(d(ir::load(a, true), a) == "0");  // nograd
  CHECK(d(B, a) == "0");
}

TEST_CASE("optimisers follow PyTorch's rules", "[optimizer]") {
  SECTION("sgd with momentum: the first step copies the gradient") {
    Gen g(kMlp);
    CHECK(has(g.routine(ir::RoutineKind::TrainStep),
              "w_momentum_buffer[j0, j1] = select(step == 1, w_grad[j0, j1], 0.9 * w_momentum_buffer[j0, j1] + w_grad[j0, j1])"));
    CHECK(has(g.routine(ir::RoutineKind::TrainStep), "w[j0, j1] = w[j0, j1] - lr * w_momentum_buffer[j0, j1]"));
  }
  SECTION("adamw decays first, then the adam step") {
    std::string spec = kMlp;
    spec.replace(spec.find("sgd(lr = 0.1, momentum = 0.9)"), 29, "adamw(lr = 0.01, weight_decay = 0.1)");
    Gen g(spec);
    std::string t = g.routine(ir::RoutineKind::TrainStep);
    CHECK(has(t, "w[j0, j1] = w[j0, j1] * (1 - lr * 0.1)"));
    CHECK(has(t, "w_exp_avg[j0, j1] = 0.9 * w_exp_avg[j0, j1] + 0.09999999999999998 * w_grad[j0, j1]"));
    CHECK(has(t, "w[j0, j1] = w[j0, j1] - lr / bc1 * (w_exp_avg[j0, j1] / (sqrt(w_exp_avg_sq[j0, j1]) / sqrt_bc2 + 1e-08))"));
    CHECK(t.find("* (1 - lr * 0.1)") < t.find("w_exp_avg[j0, j1] ="));
  }
  SECTION("adamw(decay = \"matrices\") decays only params with input axes (nanoGPT's rule)") {
    Gen g(R"(input x : [2 | 4]
param w : [4 -> 3, 2]
param b : [3, 2]
param s : [4] = ones
loss = sum(w * x + b) + sum(s *. x)
minimize loss with adamw(lr = 0.01, weight_decay = 0.1, decay = "matrices")
)");
    std::string t = g.routine(ir::RoutineKind::TrainStep);
    CHECK(has(t, "w[j0, j1, j2] = w[j0, j1, j2] * (1 - lr * 0.1)"));
    CHECK(!has(t, "b[j0, j1] = b[j0, j1] * (1 - lr"));  // a bias of two axes: no input axes
    CHECK(has(t, "b[j0, j1] = b[j0, j1] - lr / bc1"));
    CHECK(!has(t, "s[j0] = s[j0] * (1 - lr"));
  }
}

TEST_CASE("contract v1: batch axes after the runner's, ids as int32 buffers", "[lower]") {
  Gen g(R"(dim ctx = 5
input tokens : [ctx |] int
input next : [ctx |] int
input g : [3]
param wte : [3 -> 7]
param wpe : [3 -> ctx]
x = embedding(wte, tokens) + embedding(wpe, position(tokens))
y = x *. g
loss = mean(cross_entropy(wte * y, next))
output y
minimize loss with sgd(lr = 0.1)
)");
  CHECK(g.buf("tokens").ids == 7);  // the table's row count
  CHECK(g.buf("next").ids == 7);    // the class count
  CHECK(g.buf("x").ids == 0);
  CHECK(g.buf("tokens").dims == std::vector<ir::Dim>{{256, true}, {5, false}});
  std::string f = g.routine(ir::RoutineKind::Forward);
  // g : [batch | 3] meets the runner's axis of [batch, ctx | 3], not ctx.
  CHECK(has(f, "y[b0, b1, o] = x[b0, b1, o] * g[b0, o]"));
  // the gather is a kernel call (its gradient the scatter-add); positions read the table directly
  CHECK(has(f, "embedding_forward(wte, tokens -> x_emb; n x 5 positions, 7 rows of 3)"));
  CHECK(has(g.routine(ir::RoutineKind::TrainStep), "embedding_backward(tokens, x_emb_grad, wte_grad -> wte_grad;"));
  CHECK(has(f, "wpe[b1, o]"));
  // no one-hot: the target is compared with the class index
  CHECK(has(g.routine(ir::RoutineKind::TrainStep), "next[b0, b1] == index(o)"));
}

TEST_CASE("loop order: a parallel loop that writes disjoint elements, unit stride inside", "[passes]") {
  Gen g(R"(input x : [256]
param w : [256 -> 256]
loss = mean(w * x)
minimize loss with sgd(lr = 0.1)
)");
  std::string t = g.routine(ir::RoutineKind::TrainStep);
  // weight gradient: parallel over w's rows, the batch sum in the middle, columns innermost
  CHECK(has(t, "for parallel o < 256, b < n, k < 256:  w_grad[o, k] +="));
  CHECK(has(t, "for parallel b < n, o < 256, k < 256:  loss_mm[b, o] += w[o, k] * x[b, k]"));
}

TEST_CASE("attention reads q, k and v in place from a fused projection", "[lower]") {
  Gen g(R"(dim ctx = 4
input x : [ctx | 8]
param w : [8 -> 3, 2, 4]
qkv = w * x
att = attention(qkv[0], qkv[1], qkv[2], causal = true)
loss = mean(att *. att)
minimize loss with sgd(lr = 0.1)
)");
  const std::string t = g.routine(ir::RoutineKind::TrainStep);
  // no copies in: views of qkv [batch, 4 | 3, 2, 4], rows of 24 elements; the backward adds
  // into qkv's gradient through the same views
  CHECK(has(t, "attention_forward(qkv -> att, att_lse; n x 1 sequences x 2 heads, 4 x 4 positions, e 4, f 4, causal, "
               "scale 0.5; q at +0 row 24; k at +8 row 24; v at +16 row 24)"));
  CHECK(has(t, "attention_backward(qkv, att, att_grad, att_lse, qkv_grad -> att_delta, qkv_grad;"));
  CHECK_FALSE(has(t, "att_q"));
  const std::string c = emit_c(g.p, COptions{})[1].text;
  CHECK(has(c, "cannl_attention_forward_f32(&cannl_d, qkv + 0 + cannl_s * 96 + cannl_h * 4, 24, qkv + 8 + cannl_s * 96 + "
               "cannl_h * 4, 24, qkv + 16 + cannl_s * 96 + cannl_h * 4, 24, att + (cannl_s * 8 + cannl_h) * 4, 8,"));
  // parts of different tensors: each its own buffer
  Gen h(R"(dim ctx = 4
input x : [ctx | 8]
param w : [8 -> 3, 2, 4]
param u : [8 -> 3, 2, 4]
qkv = w * x
kv = u * x
att = attention(qkv[0], kv[1], kv[2])
loss = mean(att *. att)
minimize loss with sgd(lr = 0.1)
)");
  CHECK(has(h.routine(ir::RoutineKind::TrainStep), "attention_forward(att_q, att_k, att_v -> att, att_lse;"));
}

TEST_CASE("convolution reads are guarded -- its input gradient is a scatter", "[lower]") {
  Gen g(R"(input x0 : [8, 8, 2]
param s : [2]
x = x0 *. s
param k : [3, 3, 2 -> 4]
y = conv2d(x, k, stride = 2, padding = 1)
loss = mean(y *. y)
minimize loss with sgd(lr = 0.1)
)");
  std::string t = g.routine(ir::RoutineKind::TrainStep);
  // im2col: a guarded gather of the windows, then a plain contraction (a GEMM)
  CHECK(has(t, "y_col[b, y, x, ky, kx, c] = x[b, 2*y + ky - 1, 2*x + kx - 1, c]"));
  CHECK(has(t, "y[b, y, x, d] += y_col[b, y, x, ky, kx, c] * k[d, ky, kx, c]"));
  CHECK(has(t, "k_grad[d, ky, kx, c] += y_grad[b, y, x, d] * y_col[b, y, x, ky, kx, c]"));
  CHECK(has(t, "x_grad[b, 2*y + ky - 1, 2*x + kx - 1, c] += y_col_grad[b, y, x, ky, kx, c]"));  // a scatter
  // ... whose loops walk the column gradient in storage order (loop_order: stream_window_reads)
  CHECK(has(t, "for parallel b < n, y < 4, x < 4, ky < 3, kx < 3, c < 2:  x_grad["));
  auto files = emit_c(g.p, COptions{});
  std::string c = files[1].text;
  CHECK(has(c, ">= 0 &&"));  // a guarded read: padding reads zero
}

TEST_CASE("a 1x1 convolution at stride 1 without padding gathers nothing", "[lower]") {
  Gen g(R"(input x0 : [8, 8, 2]
param s : [2]
x = x0 *. s
param k : [1, 1, 2 -> 4]
y = conv2d(x, k)
loss = mean(y *. y)
minimize loss with sgd(lr = 0.1)
)");
  std::string t = g.routine(ir::RoutineKind::TrainStep);
  CHECK_FALSE(has(t, "y_col"));
  CHECK(has(t, "y[b, y, x, d] += x[b, y, x, c] * k[d, 0, 0, c]"));  // the product reads x
  CHECK(has(t, "x_grad[b, y, x, c] += y_grad[b, y, x, d] * k[d, 0, 0, c]"));  // a product, no scatter
}

TEST_CASE("the C emitter: constants, typed math, the API", "[emit]") {
  Gen g(kMlp, 32);
  COptions o;
  o.spec = "t.cannl";
  auto files = emit_c(g.p, o);
  REQUIRE(files.size() == 6);
  CHECK(files[0].name == "t.h");
  CHECK(files[3].name == "t_inference.c");
  CHECK(files[4].name == "t_infer.c");
  CHECK(has(files[0].text, "#define T_MAX_BATCH 32"));
  CHECK(has(files[0].text, "typedef float t_real;"));
  CHECK(has(files[1].text, "/* line 6: z = w * x + b */"));
  CHECK(has(files[1].text, "expf("));
  CHECK(has(files[1].text, "CANNL_PRAGMA(\"omp parallel for\")") == false);  // tiny nests run serially
  o.f64 = true;
  auto f64 = emit_c(g.p, o);
  CHECK(has(f64[0].text, "typedef double t_real;"));
  CHECK(has(f64[1].text, "exp("));
  CHECK_FALSE(has(f64[1].text, "expf("));
  CHECK(has(files[2].text, "cannl_train_main(&t_api, argc, argv)"));
}

TEST_CASE("the C emitter: omp simd on the independent inner loop of a parallel nest", "[emit]") {
  // layer_norm's normalised value and a value computed from it (the loss gradient), stored by
  // one fused nest (-O2): the outlined function of omp parallel loses restrict, and GCC 12
  // leaves such a loop scalar without it.
  const ir::Program p = test::program(R"(model t
input x : [256]
param g : [256]
param c : [256]
y = layer_norm(x) *. g + c
loss = mean(y *. y)
minimize loss with sgd(lr = 0.1)
)", 256, 2);
  const std::string c = emit_c(p, COptions{})[1].text;
  // The row's mean and variance are read into locals before the loop (GCC would reload them
  // after each store, and recompute 1 / sqrt per vector); hoist_divisions made the division
  // a product with the reciprocal.
  CHECK(has(c, "    for (int64_t b = 0; b < n; ++b) {\n"
               "        const real y_mean_row = y_mean[b];\n        const real y_var_row = y_var[b];\n"
               "        CANNL_SIMD\n        for (int64_t o = 0; o < 256; ++o) {\n"
               "            y_ln[b * 256 + o] = (x[b * 256 + o] - y_mean_row) * (1.0f / sqrtf(y_var_row + 1e-05f));\n"
               "            y_grad[b * 256 + o] ="));
}

TEST_CASE("the inference unit: forward and eval over params and their buffers only", "[emit]") {
  Gen g(kMlp, 32);
  auto files = emit_c(g.p, COptions{});
  const ir::Layout& layout = g.p.layout;
  const std::string& inf = files[3].text;
  CHECK(has(inf, "struct t_infer {"));
  CHECK(has(inf, "static void forward(struct t_infer *m,"));
  CHECK(has(inf, "static void eval_metrics(struct t_infer *m,"));
  CHECK_FALSE(has(inf, "train_step"));
  CHECK_FALSE(has(inf, "_grad"));
  CHECK_FALSE(has(inf, "momentum"));
  CHECK_FALSE(has(inf, "init_params"));
  CHECK(layout.inference.bytes > 0);
  CHECK(layout.inference.bytes < layout.training.bytes);
  // forward reads x, not the target y
  CHECK(has(files[4].text, "forward_reads[] = { 1, 0, 0}"));
  CHECK(has(files[4].text, "{&t_infer_api, forward_reads, NULL, NULL,\n                                     NULL}"));
  CHECK(has(files[0].text, "#define T_EMBEDDED_WEIGHTS 0"));
  CHECK_FALSE(has(files[0].text, "t_infer *t_infer_create_embedded(void);"));
}

TEST_CASE("embedded weights: values that read back exactly, in param order", "[emit]") {
  Gen g(kMlp, 32);
  EmbeddedWeights w{"ck.safetensors", "12", {}};
  for (int b : g.p.params) w.values.emplace_back(g.p.buffers[static_cast<size_t>(b)].elements(), 0.0);
  w.values[0][0] = static_cast<float>(0.1);
  w.values[0][1] = -0.0;
  w.values[0][2] = 1e-40;  // a float32 subnormal
  w.values[1][2] = 3;
  COptions o;
  o.weights = &w;
  auto files = emit_c(g.p, o);
  REQUIRE(files.size() == 7);
  CHECK(files[5].name == "t_weights.c");
  const std::string& c = files[5].text;
  CHECK(has(c, "static _Alignas(64) const real w_values[12] = {\n    0.1f, -0.0f, 1e-40f, 0.0f,"));
  CHECK(has(c, "static _Alignas(64) const real b_values[3] = {\n    0.0f, 0.0f, 3.0f,"));
  CHECK(has(c, "ck.safetensors (step 12)"));
  CHECK(has(files[0].text, "#define T_EMBEDDED_WEIGHTS 1"));
  CHECK(has(files[0].text, "t_infer *t_infer_create_embedded(void);"));
  // Read in place: the state's param pointers are the arrays (one per param buffer, in the order
  // of the state's params), no copy; the inference program makes its state so.
  CHECK(has(c, "static const real *const buffers[] = {\n    w_values,\n    b_values,\n    NULL};"));
  CHECK(has(c, "return t_infer_create_in_place(max_batch, buffers, NULL, NULL);"));
  CHECK(has(files[3].text, "    m->w = (real *)m->in_place[0];\n    m->b = (real *)m->in_place[1];\n"));
  CHECK(has(files[3].text, "if (own_params(m) != CANNL_OK) return CANNL_E_NOMEM;"));
  CHECK(has(files[4].text, "return t_infer_create_embedded_batch(max_batch);"));
  CHECK(has(files[4].text, "forward_reads, NULL, NULL,\n                                     create_embedded};"));
}
