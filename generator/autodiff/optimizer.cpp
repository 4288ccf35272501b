// optimizer.cpp — optimiser updates as elementwise nests (see optimizer.h).
#include "autodiff/optimizer.h"

#include <fmt/format.h>

namespace cannl {

using ir::ExprP;
using ir::Op;

namespace {

ExprP add(ExprP a, ExprP b) { return ir::binary(Op::Add, std::move(a), std::move(b)); }
ExprP sub(ExprP a, ExprP b) { return ir::binary(Op::Sub, std::move(a), std::move(b)); }
ExprP mul(ExprP a, ExprP b) { return ir::binary(Op::Mul, std::move(a), std::move(b)); }
ExprP div(ExprP a, ExprP b) { return ir::binary(Op::Div, std::move(a), std::move(b)); }
ExprP num(double v) { return ir::cnst(v); }

int state_buffer(ir::Program& p, int param, const std::string& state) {
  ir::Buffer b = p.buffers[static_cast<size_t>(param)];
  const std::string pname = b.name;
  b.name = pname + "_" + state;
  b.state_name = pname + "." + state;
  b.role = ir::Role::OptState;
  b.tensor = -1;
  b.shape = state + " of " + pname;
  p.buffers.push_back(b);
  return static_cast<int>(p.buffers.size()) - 1;
}

}  // namespace

std::vector<ir::Stmt> lower_optimizer(ir::Program& p, ir::Routine& train_step, const CallConfig& opt,
                                      const std::map<int, int>& grads, int line) {
  auto arg = [&](const char* k, double dflt) {
    auto it = opt.args.find(k);
    return it == opt.args.end() ? dflt : it->second;
  };
  const std::string& kind = opt.name;
  const double wd = arg("weight_decay", kind == "adamw" ? 0.01 : 0.0);
  const double momentum = arg("momentum", 0), dampening = arg("dampening", 0);
  const bool nesterov = arg("nesterov", 0) != 0;
  const double beta1 = arg("beta1", 0.9), beta2 = arg("beta2", 0.999), eps = arg("eps", 1e-8);

  if (kind == "adam" || kind == "adamw") {
    train_step.scalars.push_back({"bc1", fmt::format("1 - pow({}, step)", beta1)});
    train_step.scalars.push_back({"sqrt_bc2", fmt::format("sqrt(1 - pow({}, step))", beta2)});
  }

  std::vector<ir::Stmt> out;
  for (int param : p.params) {
    auto g = grads.find(param);
    if (g == grads.end()) continue;  // not used by the loss: no gradient, no update (as PyTorch)
    const std::string name = p.buffers[static_cast<size_t>(param)].name;  // a copy: buffers grow below
    auto nest = [&](int buf, ExprP body) {
      ir::Stmt s = ir::elementwise(p, buf, fmt::format("{} update of {}", kind, name));
      s.body = std::move(body);
      s.line = line;
      out.push_back(std::move(s));
    };
    ir::Stmt shape = ir::elementwise(p, param, "");
    auto P = [&] { return ir::load_all(shape, param); };
    ExprP grad = ir::load_all(shape, g->second);
    if (kind == "sgd") {
      if (wd != 0) grad = add(grad, mul(num(wd), P()));
      ExprP update = grad;
      if (momentum != 0) {
        int buf = state_buffer(p, param, "momentum_buffer");
        ExprP B = ir::load_all(shape, buf);
        // PyTorch: the first step sets the buffer to the gradient, undamped.
        nest(buf, ir::select(ir::binary(Op::Eq, ir::scalar("step"), num(1)), grad,
                             add(mul(num(momentum), B), mul(num(1 - dampening), grad))));
        update = nesterov ? add(grad, mul(num(momentum), B)) : B;
      }
      nest(param, sub(P(), mul(ir::scalar("lr"), update)));
    } else {  // adam, adamw
      if (kind == "adamw" && wd != 0) nest(param, mul(P(), sub(num(1), mul(ir::scalar("lr"), num(wd)))));
      if (kind == "adam" && wd != 0) grad = add(grad, mul(num(wd), P()));
      int m = state_buffer(p, param, "exp_avg"), v = state_buffer(p, param, "exp_avg_sq");
      ExprP M = ir::load_all(shape, m), V = ir::load_all(shape, v);
      nest(m, add(mul(num(beta1), M), mul(num(1 - beta1), grad)));
      nest(v, add(mul(num(beta2), V), mul(num(1 - beta2), mul(grad, grad))));
      ExprP denom = add(div(ir::unary(Op::Sqrt, V), ir::scalar("sqrt_bc2")), num(eps));
      nest(param, sub(P(), mul(div(ir::scalar("lr"), ir::scalar("bc1")), div(M, denom))));
    }
  }
  return out;
}

}  // namespace cannl
