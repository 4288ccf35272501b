// ir_print.cpp — the loop IR as text.
#include "ir/ir_print.h"

#include "ir/prims.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace cannl::ir {

std::string print_affine(const Affine& a, const std::vector<Iter>& iters) {
  std::string s;
  for (const auto& t : a.terms) {
    long c = t.coef;
    if (!s.empty()) {
      s += c < 0 ? " - " : " + ";
      c = c < 0 ? -c : c;
    } else if (c < 0) {
      s += "-";
      c = -c;
    }
    if (c != 1) s += fmt::format("{}*", c);
    s += iters[static_cast<size_t>(t.iter)].name;
  }
  if (s.empty()) return fmt::format("{}", a.offset);
  if (a.offset > 0) s += fmt::format(" + {}", a.offset);
  if (a.offset < 0) s += fmt::format(" - {}", -a.offset);
  return s;
}

static std::string print_access(const Access& a, const Program& p, const std::vector<Iter>& iters) {
  std::string s = p.buffers[static_cast<size_t>(a.buf)].name + "[";
  for (size_t i = 0; i < a.index.size(); ++i) {
    if (i) s += ", ";
    s += print_affine(a.index[i], iters);
  }
  return s + "]";
}

static int precedence(Op op) {
  switch (op) {
    case Op::Eq: case Op::Gt: return 1;
    case Op::Add: case Op::Sub: return 2;
    case Op::Mul: case Op::Div: return 3;
    case Op::Neg: return 4;
    default: return 5;
  }
}

static std::string number(double v) {
  std::string s = fmt::format("{}", v);
  return s;
}

static std::string print_sub(const Expr& e, const Program& p, const std::vector<Iter>& iters, int min_prec) {
  std::string s = print_expr(e, p, iters);
  return precedence(e.op) < min_prec ? "(" + s + ")" : s;
}

std::string print_expr(const Expr& e, const Program& p, const std::vector<Iter>& iters) {
  switch (e.op) {
    case Op::Const: return e.wide ? "(1/" + number(1 / e.value) + ")" : number(e.value);  // wide: x / c rounding
    case Op::Scalar: return e.name;
    case Op::Index: return "index(" + print_affine(e.access.index[0], iters) + ")";
    case Op::Keep: return "keep(" + print_affine(e.access.index[0], iters) + ", p = " + number(e.value) + ")";
    case Op::Load: return print_access(e.access, p, iters) + (e.nograd ? "'" : "");
    case Op::Neg: return "-" + print_sub(*e.args[0], p, iters, 5);
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Eq: case Op::Gt: {
      int pr = precedence(e.op);
      // Left-associative: the right operand needs parentheses at equal precedence.
      return print_sub(*e.args[0], p, iters, pr) + " " + op_name(e.op) + " " +
             print_sub(*e.args[1], p, iters, pr + 1);
    }
    case Op::Pow: return print_sub(*e.args[0], p, iters, 5) + " ** " + number(e.value);
    case Op::Select:
      return "select(" + print_expr(*e.args[0], p, iters) + ", " + print_expr(*e.args[1], p, iters) +
             ", " + print_expr(*e.args[2], p, iters) + ")";
    case Op::Uniform: case Op::Normal: case Op::Prim: {
      std::string args;
      for (const ExprP& a : e.args) args += (args.empty() ? "" : ", ") + print_expr(*a, p, iters);
      return std::string(e.op == Op::Prim ? e.prim->name : op_name(e.op)) + "(" + args + ")";
    }
  }
  return "?";
}

std::string print_stmt(const Stmt& s, const Program& p) {
  if (s.call) {  // attention_forward(q, k, v -> o, lse; ...)
    auto names = [&](const std::vector<int>& bufs) {
      std::string t;
      for (int b : bufs) t += (t.empty() ? "" : ", ") + p.buffers[static_cast<size_t>(b)].name;
      return t;
    };
    const Call& c = *s.call;
    if (is_block_call(c.kind)) {  // layers forward x12 (x, w_qkv, ... -> x_11)
      const std::string name = c.block >= 0 && static_cast<size_t>(c.block) < p.blocks.size()
                                   ? p.blocks[static_cast<size_t>(c.block)].name
                                   : fmt::format("block #{}", c.block);
      const char* half = c.kind == Call::Kind::BlockForward ? "forward" : c.kind == Call::Kind::BlockBackward ? "backward"
                         : c.kind == Call::Kind::BlockInfer ? "infer" : c.kind == Call::Kind::BlockInit ? "init"
                         : c.kind == Call::Kind::BlockNorm ? "norm" : "decode";
      return fmt::format("{} {} x{}{} ({} -> {})", name, half, c.count,
                         c.kind == Call::Kind::BlockBackward ? " (last instance first)" : "", names(call_reads(c)),
                         names(call_writes(c)));
    }
    if (c.kind == Call::Kind::BlockRest)
      return fmt::format("rest of the model ({} -> {})", names(call_reads(c)), names(call_writes(c)));
    if (c.kind == Call::Kind::EmbeddingForward || c.kind == Call::Kind::EmbeddingBackward)
      return fmt::format("{}({} -> {}; {}{} positions, {} rows of {}{})", call_name(c.kind), names(call_reads(c)),
                         names(call_writes(c)), c.batch ? "n x " : "", c.seqs, c.rows, c.width,
                         c.at_pos ? "; at pos" : "");
    std::string views;  // q, k, v read in place from a larger buffer: their offset and row
    auto view = [&](const char* x, long off, long row) {
      if (off != 0 || row != 0) views += fmt::format("; {} at +{} row {}", x, off, row);
    };
    view("q", c.q_off, c.q_row);
    view("k", c.k_off, c.k_row);
    view("v", c.v_off, c.v_row);
    return fmt::format("{}({} -> {}; {}{} sequences x {} heads{}, {} x {} positions, e {}, f {}{}{}, scale {}{}{})",
                       call_name(c.kind), names(call_reads(c)), names(call_writes(c)), c.batch ? "n x " : "", c.seqs,
                       c.heads, c.group > 1 ? fmt::format(" in groups of {}", c.group) : "", c.tq, c.tk, c.e, c.f,
                       c.causal ? ", causal" : "", c.window > 0 ? fmt::format(", window {}", c.window) : "", c.scale,
                       views, c.at_pos ? (c.ring ? "; the query at pos, keys in rings" : "; the query at pos") : "");
  }
  std::string loops;
  for (size_t i = 0; i < s.iters.size(); ++i) {
    const Iter& it = s.iters[i];
    if (!loops.empty()) loops += ", ";
    if (static_cast<int>(i) == s.parallel) loops += "parallel ";
    loops += it.batch ? fmt::format("{} < n", it.name)
             : it.at_pos ? fmt::format("{} = pos", it.name) : fmt::format("{} < {}", it.name, it.size);
  }
  std::string head = loops.empty() ? "" : "for " + loops + ":  ";
  // zero_first: the cells start from the accumulation's identity, printed "= 0 +=".
  std::string text = head;
  for (size_t i = 0; i < s.assigns.size(); ++i) {
    const Assign& a = s.assigns[i];
    std::string first;
    if (s.zero_first) first = a.accum == Accum::Add ? "= 0 " : a.accum == Accum::Max ? "= -inf " : "= inf ";
    text += (i ? ";  " : "") + print_access(a.out, p, s.iters) + " " + first + accum_symbol(a.accum) + " " +
            print_expr(*a.body, p, s.iters);
  }
  return text + (s.sequential ? "   (in order)" : "");
}

static std::string dims_text(const Buffer& b) {
  std::string s = "[";
  for (size_t i = 0; i < b.dims.size(); ++i) {
    if (i) s += ", ";
    s += b.dims[i].batch ? "batch" : fmt::format("{}", b.dims[i].size);
  }
  return s + "]";
}

// What is particular to a buffer of stacked storage or of a block body ("" for the others).
static std::string storage_text(const Program& p, const Buffer& b) {
  std::string s;
  if (b.stack > 0) s += fmt::format("   (stacked: {} instances)", b.stack);
  if (b.view_of >= 0 && static_cast<size_t>(b.view_of) < p.buffers.size())
    s += fmt::format("   (view of {} at +{})", p.buffers[static_cast<size_t>(b.view_of)].name, b.view_offset);
  if (b.block >= 0) {
    const std::string block = static_cast<size_t>(b.block) < p.blocks.size() ? p.blocks[static_cast<size_t>(b.block)].name
                                                                              : fmt::format("#{}", b.block);
    s += fmt::format("   (block {} {})", block, b.formal ? "formal" : "local");
  }
  return s;
}

std::string print_buffers(const Program& p) {
  std::string s = fmt::format("buffers (storage order; batch <= {})\n", p.max_batch);
  for (const Buffer& b : p.buffers)
    s += fmt::format("  {:<22} {:<16} {:<20} {}{}\n", b.name, role_name(b.role), dims_text(b), b.shape, storage_text(p, b));
  return s;
}

std::string print_plan(const Routine& r, const Program& p) {
  std::string in_formals;  // a block body's locals in a formal's bytes (passes/plan_blocks.cpp)
  for (const auto& [l, f] : r.hosted)
    in_formals += fmt::format("    {} in the bytes of the formal {}\n", p.buffers[static_cast<size_t>(l)].name,
                              p.buffers[static_cast<size_t>(f)].name);
  if (r.arena_bytes <= 0) return in_formals;
  // Offsets in increasing order; the buffers at one offset (sharing its bytes) on one line,
  // in storage order.
  std::map<long, std::vector<const Buffer*>> at;
  for (size_t b = 0; b < r.offsets.size() && b < p.buffers.size(); ++b)
    if (r.offsets[b] >= 0) at[r.offsets[b]].push_back(&p.buffers[b]);
  std::string s = fmt::format("  work region: {} bytes (batch <= {})\n", r.arena_bytes, p.max_batch);
  for (const auto& [offset, bufs] : at) {
    std::string names;
    for (const Buffer* b : bufs) names += (names.empty() ? "" : ", ") + b->name;
    s += fmt::format("    @ +{:<10} {}\n", offset, names);
  }
  return s + in_formals;
}

std::string print_nests(const Program& p, const std::vector<Stmt>& stmts) {
  std::string s, last;
  for (const Stmt& st : stmts) {
    std::string what = st.line ? fmt::format("# line {}: {}", st.line, st.what) : "# " + st.what;
    if (what != last) s += "  " + what + "\n";
    last = what;
    s += "    " + print_stmt(st, p) + "\n";
  }
  return s;
}

std::string print_layout(const Program& p) {
  const Layout& l = p.layout;
  if (l.align == 0) return {};
  std::string s = fmt::format("\nlayout ({}-byte aligned, batch <= {})\n", l.align, p.max_batch);
  auto arena = [&](const char* what, const Arena& a) {
    s += fmt::format("  {}: {} bytes\n", what, a.bytes);
    std::map<long, std::vector<std::string>> at;  // fields by offset; those into the work region marked
    for (size_t b = 0; b < a.field.size(); ++b)
      if (a.field[b] >= 0) at[a.field[b]].push_back(p.buffers[b].name + (a.own[b] ? "" : " (in the work region)"));
    for (const auto& [offset, names] : at) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      s += fmt::format("    @ +{:<10} {}{}\n", offset, list, offset == 0 && a.state > 0 ? "   (state: " + std::to_string(a.state) + " bytes)" : "");
    }
    if (a.work >= 0) s += fmt::format("    @ +{:<10} the routines' work region: {} bytes\n", a.work, a.work_bytes);
  };
  arena("training state", l.training);
  if (l.opt_state.bytes > 0) {
    s += fmt::format("  optimiser state: {} bytes (a block of its own)\n", l.opt_state.bytes);
    std::map<long, std::string> at;
    for (size_t b = 0; b < l.opt_state.field.size(); ++b)
      if (l.opt_state.field[b] >= 0) at[l.opt_state.field[b]] = p.buffers[b].name;
    for (const auto& [offset, name] : at) s += fmt::format("    @ +{:<10} {}\n", offset, name);
  }
  arena("inference state", l.inference);
  return s;
}

std::string print_program(const Program& p) {
  std::string s = fmt::format("model {}\n\n", p.model) + print_buffers(p) + print_layout(p);
  for (const Routine& r : p.routines) {
    s += fmt::format("\nroutine {}\n", r.name());
    s += print_plan(r, p);
    for (const ScalarDef& d : r.scalars) s += fmt::format("  scalar {} = {}\n", d.name, print_expr(*d.value, p, {}));
    s += print_nests(p, r.stmts);
  }
  std::vector<Stmt> calls;
  for (const Routine& r : p.routines)
    for (const Stmt& st : r.stmts)
      if (st.call && is_block_call(st.call->kind)) calls.push_back(st);
  return s + print_blocks(p, calls);
}

std::string print_blocks(const Program& p, const std::vector<Stmt>& calls) {
  std::string s;
  for (size_t k = 0; k < p.blocks.size(); ++k) {
    const Block& bl = p.blocks[k];
    s += fmt::format("\nblock {} (line {}: instances {}..{} of the repeat statement)\n", bl.name, bl.line, bl.first,
                     bl.first + bl.count - 1);
    auto name = [&](int b) { return b >= 0 && static_cast<size_t>(b) < p.buffers.size() ? p.buffers[static_cast<size_t>(b)].name : std::string("-"); };
    // How each call kind binds each formal (the first call of the kind).
    std::vector<std::vector<std::pair<Call::Kind, const Binding*>>> binds(p.buffers.size());
    std::set<Call::Kind> seen;
    for (const Stmt& st : calls)
      if (st.call && is_block_call(st.call->kind) && st.call->block == static_cast<int>(k) && seen.insert(st.call->kind).second)
        for (const Binding& bd : st.call->binds)
          if (bd.formal >= 0 && static_cast<size_t>(bd.formal) < binds.size())
            binds[static_cast<size_t>(bd.formal)].push_back({st.call->kind, &bd});
    auto how = [&](const Binding& bd) {
      std::string h;
      if (bd.first >= 0) h += fmt::format("l = 0: {}", name(bd.first));
      if (bd.last >= 0) h += fmt::format("{}l = {}: {}", h.empty() ? "" : "; ", bl.count - 1, name(bd.last));
      if (bd.buf >= 0) {
        std::string slot = bd.shift ? fmt::format("(l {} {})", bd.shift < 0 ? "-" : "+", bd.shift < 0 ? -bd.shift : bd.shift) : "l";
        if (bd.modulo) slot = fmt::format("({} mod {})", slot, bd.modulo);
        h += fmt::format("{}{}{}", h.empty() ? "" : "; else ", name(bd.buf),
                         bd.stride ? fmt::format("{} + {} * {}", bd.offset ? fmt::format(" + {}", bd.offset) : "", slot, bd.stride)
                                   : bd.offset ? fmt::format(" + {}", bd.offset) : std::string());
      } else if (bd.first < 0 || bd.last < 0) {
        h += std::string(h.empty() ? "" : "; else ") + "carried between instances";
      }
      return h;
    };
    auto formal = [&](int f) {
      std::string h;
      const auto& list = binds[static_cast<size_t>(f)];
      for (const auto& [kind, bd] : list) {
        bool dup = false;  // the same binding in another kind of call: said once
        for (const auto& [k2, b2] : list) {
          if (b2 == bd) break;
          dup = dup || how(*b2) == how(*bd);
        }
        if (dup) continue;
        h += (h.empty() ? "" : "   ") + (list.size() > 1 ? std::string(call_name(kind)).substr(6) + ": " : "") + how(*bd);
      }
      s += fmt::format("  formal {:<16} {:<20} {}\n", name(f), dims_text(p.buffers[static_cast<size_t>(f)]), h);
    };
    for (int f : bl.formals) formal(f);
    for (const auto& [in, out] : bl.carried) s += fmt::format("  carried {} -> {}\n", name(out), name(in));
    std::string locals, saved;
    for (int b : bl.locals) locals += (locals.empty() ? "" : ", ") + name(b);
    for (int b : bl.saved) saved += (saved.empty() ? "" : ", ") + name(b);
    s += fmt::format("  locals {}\n", locals.empty() ? "none" : locals);
    if (!saved.empty()) s += fmt::format("  saved (train body: a slot per instance) {}\n", saved);
    bool bodies = false;
    for (const Routine* r : {&bl.train, &bl.infer, &bl.init, &bl.norm, &bl.decode}) {
      if (r->stmts.empty()) continue;
      bodies = true;
      s += fmt::format("  {}\n", r->name());
      s += print_plan(*r, p);
      s += print_nests(p, r->stmts);
    }
    if (!bodies) s += "  body\n" + print_nests(p, bl.forward);
  }
  return s;
}

std::string print_lowered(const Program& p, const std::vector<Stmt>& forward) {
  return fmt::format("model {}\n\n", p.model) + print_buffers(p) + "\nforward nests of every spec tensor\n" +
         print_nests(p, forward) + print_blocks(p, forward);
}

}  // namespace cannl::ir
