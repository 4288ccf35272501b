// unroll_blocks.cpp — block calls expanded back into their instances' nests (see unroll_blocks.h).
#include "ir/unroll_blocks.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "ir/remap.h"
#include "support/diagnostic.h"

namespace cannl::ir {

namespace {

// Instance `index`'s copy of body buffer b: its name and spec shape with the instance put back.
Buffer instance_copy(const Program& p, const Block& bl, int b, long index, std::set<std::string>& names) {
  Buffer x = p.buffers[static_cast<size_t>(b)];
  auto it = bl.name_at.find(b);
  const int at = it == bl.name_at.end() ? -1 : it->second;
  const std::string base = x.name;
  if (at >= 0 && static_cast<size_t>(at) <= base.size()) {
    x.name = base.substr(0, static_cast<size_t>(at)) + fmt::format("_{}", index) + base.substr(static_cast<size_t>(at));
    // A tensor's shape reads "qkv : [...]": its name takes the instance, "qkv.3 : [...]".
    if (x.shape.compare(0, static_cast<size_t>(at), base, 0, static_cast<size_t>(at)) == 0 &&
        x.shape.size() > static_cast<size_t>(at) && x.shape[static_cast<size_t>(at)] == ' ')
      x.shape.insert(static_cast<size_t>(at), fmt::format(".{}", index));
  } else {
    x.name = fmt::format("{}_{}", base, index);
  }
  const std::string wanted = x.name;
  for (int k = 2; names.count(x.name); ++k) x.name = fmt::format("{}{}", wanted, k);
  names.insert(x.name);
  x.block = -1;
  x.formal = false;
  if (x.tensor >= 0) x.tensor += static_cast<int>((index - bl.first) * bl.tensor_step);
  return x;
}

}  // namespace

std::vector<size_t> unroll_calls(Program& p, std::vector<Stmt>& nests) {
  std::set<std::string> names;
  for (const Buffer& b : p.buffers) names.insert(b.name);
  std::map<std::pair<int, long>, int> view_at;  // (stacked buffer, offset) -> its view
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].view_of >= 0) view_at[{p.buffers[b].view_of, p.buffers[b].view_offset}] = static_cast<int>(b);
  std::vector<Stmt> out;
  std::vector<size_t> from;
  for (size_t n = 0; n < nests.size(); ++n) {
    const Stmt& s = nests[n];
    if (!s.call || s.call->kind != Call::Kind::BlockForward) {
      out.push_back(std::move(nests[n]));
      from.push_back(n);
      continue;
    }
    const Call& c = *s.call;
    if (c.block < 0 || static_cast<size_t>(c.block) >= p.blocks.size()) CANNL_BUG("a call of no block");
    const Block bl = p.blocks[static_cast<size_t>(c.block)];  // a copy: buffers grow below
    std::map<int, const Binding*> bind;
    for (const Binding& bd : c.binds) bind[bd.formal] = &bd;
    std::map<int, int> carried_from;  // carried-in formal -> the carried-out formal it reads
    for (const auto& [in, o] : bl.carried) carried_from[in] = o;
    std::map<int, int> prev;  // the previous instance's actuals
    for (long l = 0; l < c.count; ++l) {
      std::map<int, int> act;
      for (int f : bl.formals) {
        auto it = bind.find(f);
        if (it == bind.end()) CANNL_BUG(fmt::format("block {}: formal '{}' unbound", bl.name, p.buffers[static_cast<size_t>(f)].name));
        const Binding& bd = *it->second;
        int a = -1;
        if (l == 0 && bd.first >= 0) a = bd.first;
        else if (l == c.count - 1 && bd.last >= 0) a = bd.last;
        else if (bd.buf >= 0 && bd.stride == 0 && bd.offset == 0) a = bd.buf;
        else if (bd.buf >= 0) {
          auto v = view_at.find({bd.buf, bd.offset + l * bd.stride});
          if (v == view_at.end())
            CANNL_BUG(fmt::format("block {}: no view of '{}' at +{}", bl.name, p.buffers[static_cast<size_t>(bd.buf)].name,
                                  bd.offset + l * bd.stride));
          a = v->second;
        } else if (auto cf = carried_from.find(f); cf != carried_from.end()) {
          if (l == 0) CANNL_BUG(fmt::format("block {}: nothing carried into the first instance", bl.name));
          a = prev.at(cf->second);
        } else {  // carried out to the next instance: the instance's own
          p.buffers.push_back(instance_copy(p, bl, f, bl.first + l, names));
          a = static_cast<int>(p.buffers.size()) - 1;
        }
        act[f] = a;
      }
      for (int b : bl.locals) {
        p.buffers.push_back(instance_copy(p, bl, b, bl.first + l, names));
        act[b] = static_cast<int>(p.buffers.size()) - 1;
      }
      for (const Stmt& st : bl.forward) {
        out.push_back(remap_stmt(st, [&](int b) {
          auto it = act.find(b);
          if (it == act.end()) CANNL_BUG(fmt::format("block {}: its body uses '{}', not its own", bl.name, p.buffers[static_cast<size_t>(b)].name));
          return it->second;
        }));
        from.push_back(n);
      }
      prev = std::move(act);
    }
  }
  nests = std::move(out);
  return from;
}

namespace {

// The blocks dropped, their body buffers and the buffers in `also` with them; the buffers from
// `made` on (made while unrolling) take the place of the first dropped body buffer.
std::vector<int> drop(Program& p, const std::vector<std::vector<Stmt>*>& lists, size_t made, const std::set<int>& also) {
  const size_t n = p.buffers.size();
  std::vector<size_t> order;
  bool placed_new = false;
  for (size_t b = 0; b < made; ++b) {
    if (p.buffers[b].block >= 0 || also.count(static_cast<int>(b))) {
      if (!placed_new)
        for (size_t x = made; x < n; ++x) order.push_back(x);
      placed_new = true;
      continue;
    }
    order.push_back(b);
  }
  if (!placed_new)
    for (size_t x = made; x < n; ++x) order.push_back(x);
  std::vector<int> map(n, -1);
  for (size_t k = 0; k < order.size(); ++k) map[order[k]] = static_cast<int>(k);
  p.blocks.clear();
  remap_buffers(p, map, lists);
  return map;
}

}  // namespace

std::vector<int> drop_blocks(Program& p, const std::vector<std::vector<Stmt>*>& lists) {
  // Buffers after the last body buffer were made by unroll_calls (after every body buffer).
  size_t body_end = p.buffers.size();
  for (size_t b = p.buffers.size(); b-- > 0;)
    if (p.buffers[b].block >= 0) {
      body_end = b + 1;
      break;
    }
  return drop(p, lists, body_end, {});
}

void unroll_routines(Program& p) {
  if (p.blocks.empty()) return;
  const size_t made = p.buffers.size();
  std::set<std::string> names;
  for (const Buffer& b : p.buffers)
    if (b.block == -1) names.insert(b.name);
  std::map<std::pair<int, long>, int> view_at;  // (stacked buffer, offset) -> its view
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].view_of >= 0) view_at[{p.buffers[b].view_of, p.buffers[b].view_offset}] = static_cast<int>(b);
  // A buffer of carried values (slot s: instance s's value) -> the formal naming its values:
  // the value carried out (routine assembly's stack and pair of one carried name are one
  // value per instance), else the formal its calls bind to slot l in instance l.
  std::map<int, int> names_of;
  for (const Routine& r : p.routines)
    for (const Stmt& s : r.stmts) {
      if (!s.call || !is_block_call(s.call->kind)) continue;
      const Block& bl = p.blocks[static_cast<size_t>(s.call->block)];
      for (const Binding& bd : s.call->binds) {
        if (bd.buf < 0 || bd.stride == 0 || view_at.count({bd.buf, bd.offset})) continue;
        for (const auto& [in, out] : bl.carried)
          if (bd.formal == in || bd.formal == out) names_of[bd.buf] = out;
        if (bd.shift == 0) names_of.emplace(bd.buf, bd.formal);
      }
    }
  // (body local, or the formal naming carried values, instance) -> the instance's buffer
  std::map<std::pair<int, long>, int> own;
  auto own_buffer = [&](const Block& bl, int key, int like, long l) {
    auto it = own.find({key, l});
    if (it != own.end()) return it->second;
    Buffer x = instance_copy(p, bl, like, bl.first + l, names);
    p.buffers.push_back(std::move(x));
    const int b = static_cast<int>(p.buffers.size()) - 1;
    own[{key, l}] = b;
    return b;
  };
  std::set<int> slots;  // buffers of carried values, replaced by the instances' own
  for (Routine& r : p.routines) {
    std::vector<Stmt> out;
    for (Stmt& s : r.stmts) {
      if (!s.call || !is_block_call(s.call->kind)) {
        out.push_back(std::move(s));
        continue;
      }
      const Call c = *s.call;
      const Block& bl = p.blocks[static_cast<size_t>(c.block)];
      const Routine& body = body_of(bl, c.kind);
      std::vector<Stmt> nests;  // what each instance runs
      if (body.stmts.empty() && (c.kind == Call::Kind::BlockForward || c.kind == Call::Kind::BlockInfer)) {
        nests = bl.forward;  // no training body (nothing needs the block's gradients): its nests
      } else {
        const auto [lo, hi] = body_span(bl, c.kind);
        nests.assign(body.stmts.begin() + static_cast<long>(lo), body.stmts.begin() + static_cast<long>(hi));
      }
      std::map<int, const Binding*> bind;
      for (const Binding& bd : c.binds) {
        bind[bd.formal] = &bd;
        // A saved activation's stack (passes/plan_blocks.cpp): each instance's own buffer instead.
        if (!p.buffers[static_cast<size_t>(bd.formal)].formal && bd.buf >= 0) slots.insert(bd.buf);
      }
      if (c.scratch >= 0) slots.insert(c.scratch);  // the body's locals: each instance's own buffers
      for (long k = 0; k < c.count; ++k) {
        const long l = c.kind == Call::Kind::BlockBackward ? c.count - 1 - k : k;
        std::map<int, int> act;
        auto actual = [&](int b) {
          if (auto it = act.find(b); it != act.end()) return it->second;
          const bool formal = p.buffers[static_cast<size_t>(b)].formal;
          if (p.buffers[static_cast<size_t>(b)].block != c.block)
            CANNL_BUG(fmt::format("block {}: its body uses '{}', not its own", bl.name, p.buffers[static_cast<size_t>(b)].name));
          int a = -1;
          if (!formal) {
            a = own_buffer(bl, b, b, l);
          } else {
            auto bi = bind.find(b);
            if (bi != bind.end()) a = bi->second->whole(l, c.count);
            if (a < 0 && (bi == bind.end() || bi->second->buf < 0))
              CANNL_BUG(fmt::format("block {}: formal '{}' unbound in its {}", bl.name, p.buffers[static_cast<size_t>(b)].name,
                                    call_name(c.kind)));
            if (a < 0) {
              const Binding& bd = *bi->second;
              if (auto v = view_at.find({bd.buf, bd.at(l)}); v != view_at.end()) {
                a = v->second;
              } else {
                auto nm = names_of.find(bd.buf);
                const int value = nm == names_of.end() ? b : nm->second;
                a = own_buffer(bl, value, value, l + bd.shift);
                slots.insert(bd.buf);
              }
            }
          }
          act[b] = a;
          return a;
        };
        for (const Stmt& st : nests) out.push_back(remap_stmt(st, actual));
      }
    }
    r.stmts = std::move(out);
  }
  drop(p, {}, made, slots);
}

}  // namespace cannl::ir
