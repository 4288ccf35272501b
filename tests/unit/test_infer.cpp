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

TEST_CASE("infer: one mistake gives one error, not what follows from it", "[infer][broadcast][errors]") {
  // A failed broadcast leaves its result's axes to the first operand's: neither '+ 1' (a
  // scalar broadcasts to anything) nor the pooling window is reported against a dropped row.
  Run r("input f : [5, 3, 2]\nparam e : [4, 2, 2]\nq = avg_pool2d(f *. f + e *. 0 + 1, size = 2, stride = 1)\n");
  REQUIRE_FALSE(r.ok());
  INFO(r.rendered());
  CHECK(r.errors() == 1);
  CHECK(r.err().message.find("cannot add 'f *. f' : [batch | 5, 3, 2] and 'e *. 0' : [4, 2, 2]") == 0);
  // A call whose operand has too few axes says so once (not also "the window (2) is larger
  // than the padded input (1 + 2*0)" about the axes it could not find).
  // A statement that reads a tensor whose definition failed is not reported against the
  // shape that tensor was left with; an independent mistake still is.
  Run u("input x : [3]\ninput y : [4]\nu = x + y\nv = u + y\nw = x *. y\n");
  INFO(u.rendered());
  CHECK(u.errors() == 2);
  CHECK_FALSE(u.any_error_has("cannot add 'u'"));
  CHECK(u.any_error_has("cannot multiply pointwise 'x'"));
  for (const char* call : {"max_pool2d(x)", "avg_pool2d(x)", "conv2d(x, k)"}) {
    Run c(std::string("input x : [4]\nparam k : [3, 3, 1 -> 2]\ny = ") + call + "\n");
    INFO(c.rendered());
    CHECK(c.errors() == 1);
    CHECK_FALSE(c.any_error_has("larger than the padded input"));
  }
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

// ---- contract v1: sequence models and language models -----------------------------------

TEST_CASE("infer: an input's batch part follows the runner's batch axis", "[infer][v1]") {
  Run r("input x : [5, 6 | 3 -> 2]\ninput y : [6 | 2]\nz = x + y\n");
  REQUIRE_OK(r);
  CHECK(r.shape("x") == "[batch, 5, 6 | 3 -> 2]");
  CHECK(r.shape("z") == "[batch, 5, 6 | 3 -> 2]");
  // The declared batch axes align from the right among themselves: 5 against 6 is no broadcast.
  Run bad("input x : [5 | 3]\ninput y : [6 | 3]\nz = x + y\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.any_error_has("their batch axes do not broadcast"));
}

TEST_CASE("infer: integer tensors carry dtype int32 through position, index and copies", "[infer][v1]") {
  Run r("input t : [4 |] int\ninput p : [2] int\ninput f : [4 | 3]\na = t\nb = position(f)\nc = p[1]\nd = f[0]\n");
  REQUIRE_OK(r);
  for (const char* n : {"t", "p", "a", "b", "c"}) {
    INFO(n);
    CHECK(r.fe->model.find(n)->dtype == DType::Int32);
  }
  CHECK(r.fe->model.find("f")->dtype == DType::Float);
  CHECK(r.fe->model.find("d")->dtype == DType::Float);
  CHECK(r.shape("b") == "[batch, 4 | ]");
  CHECK(r.shape("c") == "[batch | ]");
  // The expressions too: the lowering reads Model::int_exprs.
  const Tensor* c = r.fe->model.find("c");
  CHECK(r.fe->model.is_int(c->expr));
  CHECK(r.fe->model.is_int(c->expr->operands[0].get()));
}

TEST_CASE("infer: an integer tensor where a float is expected is an error at its use", "[infer][v1]") {
  Run r("input t : [4 |] int\nparam w\ny = -t\nz = t ** 2\nu = sum(t)\nv = w * embedding(w, t)\n");
  REQUIRE_FALSE(r.ok());
  INFO(r.rendered());
  CHECK(r.errors() == 3);
  CHECK(r.err(0).message.find("not the operand of '-'") != std::string::npos);
  CHECK(r.err(1).message.find("not the base of '**'") != std::string::npos);
  CHECK(r.err(2).message.find("not the argument 'x' of sum") != std::string::npos);
  Run loss("input t : [4 |] int\nl = t\nminimize l with sgd(lr = 1)\n");
  REQUIRE_FALSE(loss.ok());
  CHECK(loss.any_error_has("'l' holds integers (ids); minimize needs a float scalar loss"));
}

TEST_CASE("infer: embedding takes the table's input axes and the ids' batch axes", "[infer][v1]") {
  Run r("input t : [7 |] int\nparam e : [2, 3 -> 9]\ny = embedding(e, t)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch, 7 | 2, 3]");
  // The width may come backwards; the row count only from another use.
  Run back("input t : [7 |] int\nparam e\nparam w : [5 -> 5]\ny = w * embedding(e, t)\nz = e * y\n"
           "param h : [11]\nq = z *. h\n");
  REQUIRE_OK(back);
  CHECK(back.shape("e") == "[5 -> 11]");
  Run rows("input t : [7 |] int\nparam e : [5 -> _]\ny = embedding(e, t)\n");
  REQUIRE_FALSE(rows.ok());
  CHECK(rows.errors() == 1);
  CHECK(rows.err().message.find("its output axes [_]") != std::string::npos);
  CHECK(rows.err().message.find("the row count of an embedding table cannot come from the ids") != std::string::npos);
  // A table has one output axis (its rows).
  Run two("input t : [7 |] int\nparam e : [5 -> 3, 4]\ny = embedding(e, t)\n");
  REQUIRE_FALSE(two.ok());
  CHECK(two.any_error_has("must have one output axis, its rows"));
}

TEST_CASE("infer: x[i] drops the first output axis and checks the index", "[infer][v1]") {
  Run r("input x : [3, 4, 5]\nparam w : [2 -> 6, ..]\na = x[2]\nb = w[5] + x\n");
  REQUIRE_OK(r);
  CHECK(r.shape("a") == "[batch | 4, 5]");
  CHECK(r.shape("w") == "[2 -> 6, 3, 4, 5]");  // the rest of w's outputs from x
  CHECK(r.shape("b") == "[batch | 2 -> 3, 4, 5]");
  Run out("input x : [3]\na = x[3]\nb = x[2]\n");
  REQUIRE_FALSE(out.ok());
  CHECK(out.errors() == 1);
  CHECK(out.err_at().col == 7);
  CHECK(out.err().message.find("index 3 is out of range") != std::string::npos);
  // The size may become known only later: the check runs once the shapes are final.
  Run later("param w : [2 -> ..]\na = w[4]\ninput x : [2]\nparam v : [3]\nb = w * x + v\n");
  REQUIRE_FALSE(later.ok());
  CHECK(later.any_error_has("index 4 is out of range: the first output axis of 'w' has size 3"));
}

TEST_CASE("infer: attention's shape rule", "[infer][v1]") {
  Run r("input q : [2, 9 | 4, 8]\ninput kv : [2, 5 | 4, 8]\ny = attention(q, kv, kv)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("y") == "[batch, 2, 9 | 4, 8]");
  const BoundCall& bc = r.fe->model.calls.at(r.fe->model.find("y")->expr);
  CHECK(bc.values.at("causal") == 0);
  CHECK(bc.values.count("scale") == 0);  // 1/sqrt(e): for the lowering to compute
  Run causal("input q : [9 | 4, 8]\ninput kv : [5 | 4, 8]\ny = attention(q, kv, kv, causal = true)\n");
  REQUIRE_FALSE(causal.ok());
  CHECK(causal.any_error_has("a causal attention needs as many keys as queries"));
  CHECK(causal.any_error_has("(9 vs 5)"));
  Run heads("input q : [9 | 4, 8]\ninput k : [9 | 3, 8]\ny = attention(q, k, k)\n");
  REQUIRE_FALSE(heads.ok());
  CHECK(heads.any_error_has("the keys 'k' must have the queries' head axes or their first ones"));
  Run outer("input q : [9 | 4, 8]\ninput k : [2, 9 | 4, 8]\ny = attention(q, k, k)\n");
  REQUIRE_FALSE(outer.ok());
  CHECK(outer.any_error_has("the keys 'k' must have the queries' batch axes but the last"));
}

TEST_CASE("infer: grouped-query attention and windows (contract v2)", "[infer][v2]") {
  // q : [B.., t | G.., R.., e], k, v : [B.., s | G.., e]: the result has q's axes.
  Run gqa("input q : [9 | 2, 3, 8]\ninput k : [9 | 2, 8]\ninput v : [9 | 2, 5]\n"
          "y = attention(q, k, v, causal = true, window = 4)\n");
  REQUIRE_OK(gqa);
  CHECK(gqa.shape("y") == "[batch, 9 | 2, 3, 5]");
  CHECK(gqa.fe->model.calls.at(gqa.fe->model.find("y")->expr).values.at("window") == 4);
  // multi-query: keys and values without head axes
  Run mqa("input q : [9 | 3, 8]\ninput k : [7 | 8]\ny = attention(q, k, k)\n");
  REQUIRE_OK(mqa);
  CHECK(mqa.shape("y") == "[batch, 9 | 3, 8]");
  // the keys' heads must be the queries' first ones, the values' the keys'
  Run first("input q : [9 | 2, 3, 8]\ninput k : [9 | 3, 8]\ny = attention(q, k, k)\n");
  REQUIRE_FALSE(first.ok());
  CHECK(first.any_error_has("the keys 'k' must have the queries' head axes or their first ones (grouped-query"));
  Run values("input q : [9 | 2, 3, 8]\ninput k : [9 | 2, 8]\ninput v : [9 | 2, 3, 8]\ny = attention(q, k, v)\n");
  REQUIRE_FALSE(values.ok());
  CHECK(values.any_error_has("the values 'v' must have the keys' output axes but the last"));
  Run size("input q : [9 | 2, 3, 8]\ninput k : [9 | 2, 4]\ny = attention(q, k, k)\n");
  REQUIRE_FALSE(size.ok());
  CHECK(size.any_error_has("the queries' head size"));
  // a window needs causal = true, and is a whole number >= 0
  Run window("input q : [9 | 2, 8]\ny = attention(q, q, q, window = 3)\n");
  REQUIRE_FALSE(window.ok());
  CHECK(window.any_error_has("a sliding window (window = 3) needs causal = true"));
  CHECK(window.err_at().line == 3);  // after the "model t" line
  CHECK(window.err_at().col == 5);
  Run negative("input q : [9 | 2, 8]\ny = attention(q, q, q, causal = true, window = -1)\n");
  REQUIRE_FALSE(negative.ok());
}

TEST_CASE("infer: cross_entropy and accuracy with integer targets", "[infer][v1]") {
  Run r("input l : [6 | 10]\ninput t : [6 |] int\nce = cross_entropy(l, t)\nmetric a = accuracy(l, t)\n");
  REQUIRE_OK(r);
  CHECK(r.shape("ce") == "[batch, 6 | ]");
  CHECK(r.shape("a") == "[]");
  // The one-hot form is unchanged.
  Run v0("input l : [6 | 10]\ninput t : [6 | 10]\nce = cross_entropy(l, t)\n");
  REQUIRE_OK(v0);
  CHECK(v0.shape("ce") == "[batch, 6 | ]");
  Run bad("input l : [6 | 10]\ninput t : [6 | 2] int\nce = cross_entropy(l, t)\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.any_error_has("the class indices 't' must have no output axes"));
  // Float logits only.
  Run ids("input t : [6 |] int\nce = cross_entropy(t, t)\n");
  REQUIRE_FALSE(ids.ok());
  CHECK(ids.any_error_has("not the argument 'logits' of cross_entropy"));
}

TEST_CASE("infer: softmax, log_softmax and layer_norm with a spec", "[infer][v1]") {
  Run r("input x : [3 | 4, 5]\na = softmax(x, \"b, t|h, k => b, t|h\")\nn = layer_norm(x, \"b, t|h, k => b, t|\")\n");
  REQUIRE_OK(r);
  CHECK(r.shape("a") == "[batch, 3 | 4, 5]");
  CHECK(r.shape("n") == "[batch, 3 | 4, 5]");
  const BoundCall& bc = r.fe->model.calls.at(r.fe->model.find("n")->expr);
  REQUIRE(bc.spec);
  CHECK(bc.values.at("eps") == Approx(1e-5));
  Run bad("input x : [3 | 4, 5]\na = softmax(x, \"b, t|h => b, t|\")\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.any_error_has("the output axes of 'x' must match \"h\" in the spec"));
}

TEST_CASE("infer: options: strings, booleans and defaults", "[infer][v1]") {
  Run r("input x : [4]\ng = gelu(x, approximate = \"tanh\")\nh = gelu(x)\n"
        "loss = mean(g + h)\nminimize loss with adamw(lr = 1e-3, decay = \"matrices\")\n");
  REQUIRE_OK(r);
  const Model& m = r.fe->model;
  CHECK(m.calls.at(m.find("g")->expr).strings.at("approximate") == "tanh");
  CHECK(m.calls.at(m.find("h")->expr).strings.at("approximate") == "none");
  CHECK(m.optimizer->strings.at("decay") == "matrices");
  Run d("input x : [4]\nloss = mean(x)\nminimize loss with adamw\n");
  REQUIRE_OK(d);
  CHECK(d.fe->model.optimizer->strings.at("decay") == "all");
  // nesterov is a boolean: true/false, or a number as before (0 is false).
  for (const char* v : {"true", "1", "2.5"}) {
    Run n(std::string("input x : [4]\nloss = mean(x)\nminimize loss with sgd(lr = 1, momentum = 0.9, nesterov = ") + v + ")\n");
    REQUIRE_OK(n);
    CHECK(n.fe->model.optimizer->args.at("nesterov") == 1);
  }
  Run f("input x : [4]\nloss = mean(x)\nminimize loss with sgd(lr = 1, nesterov = false)\n");
  REQUIRE_OK(f);
  CHECK(f.fe->model.optimizer->args.at("nesterov") == 0);
}

TEST_CASE("infer: --dim overrides a dim everywhere it is used", "[infer][v1]") {
  std::string text = "model t\ndim ctx = 64\ndim d = 8\ninput x : [ctx | d]\nparam w : [d -> 2 * d]\ny = w * x\n";
  auto fe = run_frontend("t.cannl", text, Stage::Shapes, {{"ctx", 16}, {"d", 3}});
  REQUIRE(fe->ok());
  CHECK(fe->usage_error.empty());
  CHECK(print_shape(fe->shapes.tensors[1]) == "[3 -> 6]");
  CHECK(print_shape(fe->shapes.tensors[2]) == "[batch, 16 | 6]");
  auto bad = run_frontend("t.cannl", text, Stage::Shapes, {{"width", 16}});
  CHECK(bad->usage_error == "--dim width=16: the spec has no dim 'width' (its dims: ctx, d)");
}

// ---- repeat blocks -------------------------------------------------------------------------

TEST_CASE("repeat: one tensor per name and instance, a carried name chains them", "[infer][repeat]") {
  Run r("dim n = 3\ninput x : [4]\nh = x\nrepeat n carry h\n  param w : [4 -> 4]\n  z = w * h\n  h = h + z\nend\n"
        "y = h *. 2\noutput h\n");
  REQUIRE_OK(r);
  const Model& m = r.fe->model;
  std::vector<std::string> names;
  for (const Tensor& t : m.tensors) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"x", "h", "w.0", "z.0", "h.0", "w.1", "z.1", "h.1", "w.2", "z.2", "h.2",
                                          "y"});
  // Instance 1 reads instance 0's h; after the block h is the last instance's.
  const Tensor* z1 = m.find("z.1");
  REQUIRE(z1->expr->kind == ExprKind::MatMul);
  CHECK(z1->expr->operands[0]->name == "w.1");
  CHECK(z1->expr->operands[1]->name == "h.0");
  CHECK(m.find("z.0")->expr->operands[1]->name == "h");
  CHECK(m.find("y")->expr->operands[0]->name == "h.2");
  CHECK(m.outputs == std::vector<int>{m.index.at("h.2")});
  CHECK(m.find("w.2")->instance == 2);
  CHECK(m.find("w.2")->block != nullptr);
  CHECK(m.find("x")->instance == -1);
  // The instances share the block's source: diagnostics point into it.
  CHECK(m.find("z.0")->expr->range.begin == m.find("z.2")->expr->range.begin);
}

TEST_CASE("repeat: errors in a block are reported once, with the instance", "[infer][repeat]") {
  Run r("input x : [4]\nh = x\nrepeat 4 carry h\n  h = h + nope\nend\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.errors() == 1);
  REQUIRE(r.err().notes.size() == 1);
  CHECK(r.err().notes[0].message == "in instance 0 (of 4) of this repeat block");
  Run s("input x : [4]\nh = x\nrepeat 3 carry h\n  param w : [4 -> 5]\n  h = w * h\nend\n");
  REQUIRE_FALSE(s.ok());
  CHECK(s.errors() == 1);
  REQUIRE(s.err().notes.size() == 1);
  CHECK(s.err().notes[0].message == "in instance 1 (of 3) of this repeat block");
  CHECK(s.fe->file.line_col(s.err().notes[0].range.begin).line == 4);
}

TEST_CASE("infer: optimiser groups take the params by kind, in order (contract v2 §5)", "[infer][v2]") {
  const std::string body =
      "dim vocab = 16\ninput tokens : [8 |] int\ninput next : [8 |] int\n"
      "param wte : [4 -> vocab]\nparam w : [4 -> 4]\nparam g : [4] = ones\nparam w_head : [4 -> vocab]\n"
      "param frozen_w : [4 -> 4] frozen\n"
      "x = embedding(wte, tokens)\n"
      "repeat 2 carry x\n  param u : [4 -> 4]\n  x = u * x\nend\n"
      "logits = w_head * ((frozen_w * (w * x)) *. g)\nloss = mean(cross_entropy(logits, next))\n";
  auto names = [](const Run& r, size_t g) {
    std::string out;
    for (int t : r.fe->model.opt_groups.at(g).params)
      out += (out.empty() ? "" : " ") + r.fe->model.tensors[static_cast<size_t>(t)].name;
    return out;
  };
  Run r(body + "minimize loss with muon on matrices, adamw on embeddings, sgd(lr = 1) on vectors\n");
  INFO(r.rendered());
  REQUIRE(r.ok());
  REQUIRE(r.fe->model.opt_groups.size() == 3);
  CHECK(names(r, 0) == "w w_head u.0 u.1");
  CHECK(names(r, 1) == "wte");
  CHECK(names(r, 2) == "g");
  CHECK(r.fe->model.optimizer->name == "muon");
  Run l(body + "minimize loss with muon on [u, w], adam on others\n");
  INFO(l.rendered());
  REQUIRE(l.ok());
  CHECK(names(l, 0) == "w u.0 u.1");
  CHECK(names(l, 1) == "wte g w_head");
  Run v0(body + "minimize loss with adam\n");
  REQUIRE(v0.ok());
  CHECK(names(v0, 0) == "wte w g w_head u.0 u.1");
  // A param in none, a param in two, muon on a vector, a frozen param listed.
  Run none(body + "minimize loss with muon on matrices, adam on vectors\n");
  CHECK(none.any_error_has("the param 'wte' is in no optimiser group"));
  Run two(body + "minimize loss with adam on others, muon on matrices\n");
  CHECK(two.any_error_has("the param 'w' is in two optimiser groups"));
  Run vec(body + "minimize loss with muon on [g], adam on others\n");
  CHECK(vec.any_error_has("muon updates matrices only, but the param 'g' has no input axes"));
  Run fz(body + "minimize loss with muon on [frozen_w], adam on others\n");
  CHECK(fz.any_error_has("'frozen_w' is frozen"));
}
