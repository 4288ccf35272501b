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

std::vector<int> drop_blocks(Program& p, const std::vector<std::vector<Stmt>*>& lists) {
  const size_t n = p.buffers.size();
  // The first body buffer of each block: where the buffers made after the bodies go (in order).
  std::vector<size_t> order;
  size_t body_end = n;  // buffers from here on were made by unroll_calls (after every body buffer)
  for (size_t b = n; b-- > 0;)
    if (p.buffers[b].block >= 0) {
      body_end = b + 1;
      break;
    }
  bool placed_new = false;
  for (size_t b = 0; b < body_end; ++b) {
    if (p.buffers[b].block >= 0) {
      if (!placed_new)
        for (size_t x = body_end; x < n; ++x) order.push_back(x);
      placed_new = true;
      continue;
    }
    order.push_back(b);
  }
  if (!placed_new)
    for (size_t x = body_end; x < n; ++x) order.push_back(x);
  std::vector<int> map(n, -1);
  for (size_t k = 0; k < order.size(); ++k) map[order[k]] = static_cast<int>(k);
  p.blocks.clear();
  remap_buffers(p, map, lists);
  return map;
}

}  // namespace cannl::ir
