// Shape inference through the whole front end (contract §5, §7, §10), on small inline specs.
// Complements the data-driven tests/specs/shapes: other sizes, other combinations, and the
// error messages of shape mistakes.
#include <catch2/catch.hpp>

#include <sstream>

#include "driver/commands.h"
#include "driver/frontend.h"

using namespace cannl;

namespace {

struct Run {
  std::unique_ptr<Frontend> fe;
  explicit Run(const std::string& body) : fe(run_frontend("t.cannl", "model t\n" + body)) {}
  bool ok() const { return fe->ok(); }
  std::string shape(const std::string& name) const {
    const Tensor* t = fe->model.find(name);
    if (!t || fe->shapes.tensors.empty()) return "<none>";
    return print_shape(fe->shapes.tensors.at(static_cast<size_t>(t - fe->model.tensors.data())));
  }
  std::string rendered() const {
    std::ostringstream os;
    fe->diags.render(os);
    return os.str();
  }
  int errors() const { return fe->diags.error_count(); }
  const Diagnostic& err(size_t i = 0) const { return fe->diags.all().at(i); }
  LineCol err_at(size_t i = 0) const { return fe->file.line_col(err(i).range.begin); }
  bool any_error_has(const std::string& text) const {
    for (const Diagnostic& d : fe->diags.all())
      if (d.message.find(text) != std::string::npos) return true;
    return false;
  }
};

}  // namespace

#define REQUIRE_OK(r) \
  do {                \
    INFO((r).rendered()); \
    REQUIRE((r).ok()); \
  } while (0)

// ---- broadcasting, one axis kind at a time ------------------------------------------------

TEST_CASE("infer: output axes broadcast from the right, across ranks", "[infer][broadcast]") {
  Run r("input a : [4, 1, 3]\ninput b : [5, 3]\ny = a + b\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch | 4, 5, 3]");
}

TEST_CASE("infer: input axes broadcast separately from output axes", "[infer][broadcast]") {
  Run r("input a : [2, 1 -> 6]\ninput b : [7 -> 6]\ny = a *. b\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch | 2, 7 -> 6]");
}

TEST_CASE("infer: a size-1 output axis stretches while the input kind comes from one side",
          "[infer][broadcast]") {
  Run r("input a : [3 -> 1]\ninput b : [4]\ny = a / b\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch | 3 -> 4]");
}

TEST_CASE("infer: an unbatched computed tensor broadcasts over the batch", "[infer][broadcast]") {
  Run r("input x : [5]\ns = mean(x, \"b|o => o\")\ny = x - s\nz = s - x\n");
  REQUIRE_OK(r);
  CHECK(r.shape("s") == "[5]");
  CHECK(r.shape("y") == "[batch | 5]");
  CHECK(r.shape("z") == "[batch | 5]");
}

TEST_CASE("infer: two inputs share the one batch axis", "[infer][broadcast]") {
  Run r("input x : [3]\ninput y : [3]\nz = x + y\nw = z *. x - y\n");
  REQUIRE_OK(r);
  CHECK(r.shape("z") == "[batch | 3]");
  CHECK(r.shape("w") == "[batch | 3]");
}

TEST_CASE("infer: axes never move between kinds to make a broadcast work",
          "[infer][broadcast][errors]") {
  // b's 3 is an output axis; it cannot meet a's input axis 3.
  Run r("input a : [3 -> 4]\ninput b : [3]\ny = a + b\n");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message.find("cannot add 'a' : [batch | 3 -> 4] and 'b' : [batch | 3]: their "
                             "output axes do not broadcast: ") == 0);
  CHECK(r.err().message.find("(sizes must be equal, or 1)") != std::string::npos);
  CHECK(r.err_at().line == 4);
  CHECK(r.err_at().col == 7);
}

TEST_CASE("infer: a mismatch in the input kind says so", "[infer][broadcast][errors]") {
  Run r("input a : [3 -> 2]\ninput b : [4 -> 2]\ny = a *. b\n");
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message.find("cannot multiply pointwise 'a' : [batch | 3 -> 2] and 'b' : "
                             "[batch | 4 -> 2]") == 0);
  CHECK(r.err().message.find("their input axes do not broadcast") != std::string::npos);
}

TEST_CASE("infer: a param written with a size-1 axis broadcasts like data", "[infer][broadcast]") {
  Run r("input x : [5]\nparam s : [1]\ny = x *. s\n");
  REQUIRE_OK(r);
  CHECK(r.shape("s") == "[1]");
  CHECK(r.shape("y") == "[batch | 5]");
}

TEST_CASE("infer: params have no batch axes", "[infer][params]") {
  Run r("input x : [2, 3]\nparam b\ny = x + b\n");
  REQUIRE_OK(r);
  CHECK(r.shape("b") == "[2, 3]");
  CHECK(r.shape("y") == "[batch | 2, 3]");
}

// ---- backward inference --------------------------------------------------------------------

TEST_CASE("infer: params inferred backwards across several statements", "[infer][backward]") {
  Run r(
      "input x : [6]\n"
      "input t : [2]\n"
      "param w1, w2, w3, b3\n"
      "param b1 : [7]\n"
      "param b2 : [5]\n"
      "h1 = relu(w1 * x + b1)\n"
      "h2 = tanh(w2 * h1 + b2)\n"
      "out = w3 * h2 + b3\n"
      "loss = mean(cross_entropy(out, t))\n"
      "minimize loss with sgd(lr = 0.1)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("w1") == "[6 -> 7]");
  CHECK(r.shape("w2") == "[7 -> 5]");
  CHECK(r.shape("w3") == "[5 -> 2]");
  CHECK(r.shape("b3") == "[2]");
  CHECK(r.shape("out") == "[batch | 2]");
  CHECK(r.shape("loss") == "[]");
}

TEST_CASE("infer: a param's output axes come from a statement three lines later",
          "[infer][backward]") {
  Run r(
      "input x : [4]\n"
      "input c : [9]\n"
      "param w\n"
      "h = w * x\n"
      "g = relu(h)\n"
      "e = exp(g)\n"
      "k = e *. c\n");
  REQUIRE_OK(r);
  CHECK(r.shape("w") == "[4 -> 9]");
  CHECK(r.shape("h") == "[batch | 9]");
}

TEST_CASE("infer: a param inferred backwards through an einsum", "[infer][backward]") {
  Run r(
      "input x : [3]\n"
      "input c : [7]\n"
      "param w\n"
      "y = einsum(\"i->o; b|i => b|o\", w, x)\n"
      "z = y + c\n");
  REQUIRE_OK(r);
  CHECK(r.shape("w") == "[3 -> 7]");
  CHECK(r.shape("z") == "[batch | 7]");
}

TEST_CASE("infer: a written '_' is filled from a later statement", "[infer][backward]") {
  Run r("input x : [3]\nparam w : [_ -> _]\nparam b : [8]\ny = w * x\nz = y + b\n");
  REQUIRE_OK(r);
  CHECK(r.shape("w") == "[3 -> 8]");
}

// ---- matrix product -------------------------------------------------------------------------

TEST_CASE("infer: matrix product of batched data with an unbatched computed vector",
          "[infer][matmul]") {
  Run r("input a : [3 -> 4]\ninput v : [3]\ns = sum(v, \"b|i => i\")\ny = a * s\n");
  REQUIRE_OK(r);
  CHECK(r.shape("s") == "[3]");
  CHECK(r.shape("y") == "[batch | 4]");
}

TEST_CASE("infer: matrix product of two unbatched params stays unbatched", "[infer][matmul]") {
  Run r("input x : [3]\nparam a : [5 -> 2]\nparam b : [3 -> 5]\nm = a * b\ny = m * x\n");
  REQUIRE_OK(r);
  CHECK(r.shape("m") == "[3 -> 2]");
  CHECK(r.shape("y") == "[batch | 2]");
}

TEST_CASE("infer: matrix product keeps the right operand's input axes", "[infer][matmul]") {
  Run r("input a : [3 -> 4]\ninput b : [2 -> 3]\ny = a * b\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch | 2 -> 4]");
}

TEST_CASE("infer: a matrix product mismatch names both operands and their shapes",
          "[infer][matmul][errors]") {
  Run r("input a : [3 -> 4]\ninput v : [5]\ny = a * v\n");
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message.find("'a' : [batch | 3 -> 4]") != std::string::npos);
  CHECK(r.err().message.find("'v' : [batch | 5]") != std::string::npos);
  CHECK(r.err().message.find("the input axes of 'a' must equal the output axes of 'v'") !=
        std::string::npos);
  CHECK(r.err_at().line == 4);
  CHECK(r.err_at().col == 7);
  // The rendered error shows the statement that joined them.
  CHECK(r.rendered().find("    4 | y = a * v\n") != std::string::npos);
}

TEST_CASE("infer: a number in a matrix product takes the contraction's shape", "[infer][matmul]") {
  Run r("dim k = 3\ninput x : [3 -> 4]\ny = x * 2\nz = x * k\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch | 4]");
  CHECK(r.shape("z") == "[batch | 4]");
  const Expr* two = r.fe->model.find("y")->expr->operands[1].get();
  CHECK(print_shape(r.fe->shapes.of(two)) == "[3]");
}

// ---- einsum -----------------------------------------------------------------------------------

TEST_CASE("infer: '...' in two operands is the same axes", "[infer][einsum]") {
  Run r("input x : [2, 3]\ninput y : [3, 5]\nz = einsum(\"...|ij; ...|jk => ...|ik\", x, y)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("z") == "[batch | 2, 5]");
}

TEST_CASE("infer: '...' shared with a param gives the param those axes", "[infer][einsum]") {
  Run r("input x : [4, 5]\nparam g\ny = einsum(\"b|...; ... => b|...\", x, g)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("g") == "[4, 5]");
  CHECK(r.shape("y") == "[batch | 4, 5]");
}

TEST_CASE("infer: '...' standing for different axes in two operands is an error",
          "[infer][einsum][errors]") {
  Run r("input x : [2, 3]\ninput z : [3]\ny = einsum(\"b|...; b|... => b|...\", x, z)\n");
  REQUIRE_FALSE(r.ok());
  INFO(r.rendered());
  CHECK(r.any_error_has("'z'"));
}

TEST_CASE("infer: einsum sums over input axes with a reduction spec", "[infer][einsum]") {
  Run r("input x : [3 -> 4]\ny = sum(x, \"b|i->o => b|o\")\nz = max(x, \"b|i->o => i\")\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch | 4]");
  CHECK(r.shape("z") == "[3]");
}

// A comma-free spec valid read by letters and by words (spec/einsum.h): the operands' shapes
// decide, and the reading taken is the one later stages see.
const EinsumSpec* bound_spec(const Run& r, const std::string& callee) {
  for (const auto& [e, c] : r.fe->model.calls)
    if (e->name == callee) return c.spec;
  return nullptr;
}

TEST_CASE("infer: einsum words when the shapes rule out the letters", "[infer][einsum]") {
  Run r("input m : [3 -> 4]\ny = einsum(\"b|inp->out => b|out\", m)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch | 4]");
  const EinsumSpec* spec = bound_spec(r, "einsum");
  REQUIRE(spec);
  REQUIRE(spec->operands.at(0).part(AxisKind::Input).size() == 1);
  CHECK(spec->operands.at(0).part(AxisKind::Input)[0].name == "inp");

  Run s("input x : [5, 6]\ny = sum(x, \"b|rows, cols => cols\")\nz = mean(x, \"b|ro => ro\")\n");
  REQUIRE_OK(s);
  CHECK(s.shape("y") == "[6]");
  CHECK(s.shape("z") == "[5, 6]");  // letters fit two axes; words 'ro' would need one
}

TEST_CASE("infer: einsum letters when both readings fit", "[infer][einsum]") {
  // w's shape is not known at the einsum: nothing rules the letters out, so i, n -> o, u, t.
  Run r("input k : [2, 3 -> 4, 5, 6]\nparam w\ny = einsum(\"in->out => out\", w)\nz = w *. k\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[4, 5, 6]");
  const EinsumSpec* spec = bound_spec(r, "einsum");
  REQUIRE(spec);
  CHECK(spec->operands.at(0).part(AxisKind::Input).size() == 2);
}

TEST_CASE("infer: einsum that fits neither reading reports the letter reading",
          "[infer][einsum][errors]") {
  Run r("input m : [3, 2 -> 4]\ny = einsum(\"b|inp->out => b|out\", m)\n");
  REQUIRE_FALSE(r.ok());
  INFO(r.rendered());
  CHECK(r.any_error_has("\"i,n,p\""));
  CHECK(r.err_at().line == 3);
}

// ---- convolution and pooling ------------------------------------------------------------------

TEST_CASE("infer: conv2d stride 3, no padding", "[infer][conv]") {
  Run r("input x : [10, 10, 2]\nparam k : [4, 4, 2 -> 5]\nc = conv2d(x, k, stride = 3)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("c") == "[batch | 3, 3, 5]");  // (10 - 4) / 3 + 1
}

TEST_CASE("infer: conv2d with a rectangular kernel, stride 2 and padding 2", "[infer][conv]") {
  Run r("input x : [9, 11, 1]\nparam k : [3, 5, 1 -> 2]\nc = conv2d(x, k, stride = 2, padding = 2)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("c") == "[batch | 6, 6, 2]");  // (9+4-3)/2+1, (11+4-5)/2+1
}

TEST_CASE("infer: conv2d kernel channels from the image and output channels from a bias",
          "[infer][conv][backward]") {
  Run r("input x : [8, 8, 2]\nparam k : [3, 3, _ -> _]\nparam b : [6]\nc = conv2d(x, k) + b\n");
  REQUIRE_OK(r);
  CHECK(r.shape("k") == "[3, 3, 2 -> 6]");
  CHECK(r.shape("c") == "[batch | 6, 6, 6]");
}

TEST_CASE("infer: padding lets a kernel larger than the image fit", "[infer][conv]") {
  Run r("input x : [3, 3, 1]\nparam k : [5, 5, 1 -> 1]\nc = conv2d(x, k, padding = 1)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("c") == "[batch | 1, 1, 1]");
}

TEST_CASE("infer: a kernel larger than the padded image is an error", "[infer][conv][errors]") {
  Run r("input x : [3, 3, 1]\nparam k : [6, 6, 1 -> 1]\nc = conv2d(x, k, padding = 1)\n");
  REQUIRE_FALSE(r.ok());
  INFO(r.rendered());
  CHECK(r.any_error_has("the window (6) is larger than the padded input (3 + 2*1)"));
  CHECK(r.err_at().line == 4);
  CHECK(r.err_at().col == 5);
}

TEST_CASE("infer: max_pool2d on odd sizes rounds down", "[infer][pool]") {
  Run r(
      "input x : [7, 9, 2]\n"
      "input y : [10, 11, 1]\n"
      "p = max_pool2d(x)\n"
      "q = max_pool2d(y, size = 3)\n"
      "s = max_pool2d(x, size = 3, stride = 2)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("p") == "[batch | 3, 4, 2]");
  CHECK(r.shape("q") == "[batch | 3, 3, 1]");
  CHECK(r.shape("s") == "[batch | 3, 4, 2]");  // (7-3)/2+1, (9-3)/2+1
}

TEST_CASE("infer: max_pool2d keeps every axis after the two leading ones", "[infer][pool]") {
  Run r("input x : [5, 5, 3, 2]\np = max_pool2d(x)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("p") == "[batch | 2, 2, 3, 2]");
}

TEST_CASE("infer: pooling after a convolution", "[infer][pool][conv]") {
  Run r(
      "input img : [13, 13, 1]\n"
      "param k : [3, 3, 1 -> 4]\n"
      "param w\n"
      "input t : [10]\n"
      "h = max_pool2d(relu(conv2d(img, k)))\n"
      "o = w * h\n"
      "loss = mean(cross_entropy(o, t))\n");
  REQUIRE_OK(r);
  CHECK(r.shape("h") == "[batch | 5, 5, 4]");  // 13 -> 11 -> 5
  CHECK(r.shape("w") == "[5, 5, 4 -> 10]");
}

TEST_CASE("infer: pooling errors", "[infer][pool][errors]") {
  Run small("input x : [2, 2, 1]\np = max_pool2d(x, size = 3)\n");
  REQUIRE_FALSE(small.ok());
  INFO(small.rendered());
  CHECK(small.any_error_has("window (3) is larger"));
  Run flat("input x : [8]\np = max_pool2d(x)\n");
  REQUIRE_FALSE(flat.ok());
  INFO(flat.rendered());
  CHECK(flat.any_error_has("needs at least two output axes"));
}

// ---- losses and metrics ---------------------------------------------------------------------------

TEST_CASE("infer: cross_entropy makes a param's output axes those of the target",
          "[infer][loss][backward]") {
  Run r("input x : [6]\ninput t : [10]\nparam w\nce = cross_entropy(w * x, t)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("w") == "[6 -> 10]");
  CHECK(r.shape("ce") == "[batch | ]");
}

TEST_CASE("infer: cross_entropy keeps the logits' input axes", "[infer][loss]") {
  Run r("input l : [2, 3 -> 10]\ninput t : [10]\nce = cross_entropy(l, t)\nm = mean(ce)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("ce") == "[batch | 2, 3 -> ]");
  CHECK(r.shape("m") == "[]");
}

TEST_CASE("infer: cross_entropy of logits and target with different outputs",
          "[infer][loss][errors]") {
  Run r("input l : [10]\ninput t : [9]\nce = cross_entropy(l, t)\n");
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message.find("'l' : [batch | 10]") != std::string::npos);
  CHECK(r.err().message.find("'t' : [batch | 9]") != std::string::npos);
  CHECK(r.err().message.find("output axes of 'l' and 't' must be equal") != std::string::npos);
  CHECK(r.err_at().col == 6);
}

TEST_CASE("infer: the loss must be a scalar", "[infer][loss][errors]") {
  Run r(
      "input l : [10]\ninput t : [10]\n"
      "ce = cross_entropy(l, t)\n"
      "minimize ce with sgd(lr = 0.1)\n");
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message ==
        "the loss 'ce' must be a scalar [], but it is [batch | ]; reduce it, e.g. mean(ce)");
  CHECK(r.err_at().line == 5);
  CHECK(r.err_at().col == 10);
}

TEST_CASE("infer: metrics must be scalars -- accuracy and means are", "[infer][loss]") {
  Run bad("input x : [3 -> 2]\nmetric m = relu(x)\n");
  REQUIRE(bad.errors() == 1);
  INFO(bad.rendered());
  CHECK(bad.err().message.find("metric 'm' must be a scalar [], but it is [batch | 3 -> 2]") == 0);
  CHECK(bad.err_at().line == 3);
  CHECK(bad.err_at().col == 8);
  Run good(
      "input l : [10]\ninput t : [10]\n"
      "metric acc = accuracy(l, t)\n"
      "metric ce = mean(cross_entropy(l, t))\n");
  REQUIRE_OK(good);
  CHECK(good.shape("acc") == "[]");
  CHECK(good.shape("ce") == "[]");
}

// ---- unconstrained params and inputs -----------------------------------------------------------

TEST_CASE("infer: a param nothing constrains is an error naming it and its axes",
          "[infer][params][errors]") {
  Run r("input x : [3]\nparam g\ns = sum(g) + sum(x)\n");
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message.find("cannot infer the shape of param 'g'") == 0);
  CHECK(r.err().message.find("its input axes [..] and its output axes [..]") != std::string::npos);
  CHECK(r.err_at().line == 3);
  CHECK(r.err_at().col == 7);
}

TEST_CASE("infer: only the unconstrained part of a param is named", "[infer][params][errors]") {
  Run r("param w : [_ -> 4]\ns = sum(w)\n");
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message.find("param 'w': nothing constrains its input axes [_] (") !=
        std::string::npos);
}

TEST_CASE("infer: two params whose shared axes nothing fixes are both reported",
          "[infer][params][errors]") {
  Run r("input x : [3]\ninput c : [2]\nparam a, b\ny = a * b * x\nz = y + c\n");
  REQUIRE_FALSE(r.ok());
  INFO(r.rendered());
  CHECK(r.errors() == 2);
  CHECK(r.any_error_has("param 'a'"));
  CHECK(r.any_error_has("param 'b'"));
}

TEST_CASE("infer: an input's '..' that nothing constrains is an error", "[infer][inputs][errors]") {
  Run r("input x : [.., 3]\ny = relu(x)\n");
  REQUIRE(r.errors() == 1);
  INFO(r.rendered());
  CHECK(r.err().message.find("cannot infer the shape of input 'x'") == 0);
  CHECK(r.err().message.find("write every axis size of an input") != std::string::npos);
}

TEST_CASE("infer: data never gains axes", "[infer][inputs][errors]") {
  Run outputs("input x : [6]\ny = einsum(\"b|ij => b|ji\", x)\n");
  REQUIRE_FALSE(outputs.ok());
  INFO(outputs.rendered());
  CHECK(outputs.any_error_has("'x'"));
  Run batch("input x : [6]\ny = einsum(\"b, c|i => b, c|i\", x)\n");
  REQUIRE_FALSE(batch.ok());
  INFO(batch.rendered());
  CHECK(batch.any_error_has("the batch axes of 'x'"));
  // Broadcasting with a bigger partner does not add axes to the input itself.
  Run ok("input x : [3]\ninput m : [2, 3]\ny = x + m\n");
  REQUIRE_OK(ok);
  CHECK(ok.shape("x") == "[batch | 3]");
  CHECK(ok.shape("y") == "[batch | 2, 3]");
}

// ---- pointwise functions and operators --------------------------------------------------------------

TEST_CASE("infer: unary operators and pointwise functions keep every axis kind", "[infer][pointwise]") {
  Run r(
      "dim h = 4\n"
      "input x : [3 -> 4]\n"
      "a = -(x ** 2)\n"
      "b = softmax(x)\n"
      "c = layer_norm(x *. h)\n"
      "d = gelu(sqrt(abs(x)))\n");
  REQUIRE_OK(r);
  for (const char* n : {"a", "b", "c", "d"}) {
    INFO(n);
    CHECK(r.shape(n) == "[batch | 3 -> 4]");
  }
}

TEST_CASE("infer: check_text prints every tensor's shape", "[infer][driver]") {
  std::ostringstream out, err;
  int rc = check_text("t.cannl", "model t\ninput x : [3]\nparam w : [3 -> 2]\ny = w * x\n",
                      CheckOptions{}, out, err);
  CHECK(rc == 0);
  CHECK(out.str() == "x : [batch | 3]\nw : [3 -> 2]\ny : [batch | 2]\n");
  std::ostringstream out2, err2;
  rc = check_text("t.cannl", "model t\ninput x : [3]\ny = x + z\n", CheckOptions{}, out2, err2);
  CHECK(rc == 1);
  CHECK(out2.str().empty());
  CHECK(err2.str().find("t.cannl:3:9: error: unknown tensor 'z'") == 0);
  CHECK(err2.str().find("t.cannl: 1 error\n") != std::string::npos);
}
