// c_tables.cpp — the C target's tables, a repeat block's instances folded (see c_tables.h).
#include "emit/c_tables.h"

#include <algorithm>
#include <fmt/format.h>

#include "emit/c_common.h"
#include "support/diagnostic.h"

namespace cannl {

CRow& CRow::add(const std::string& s) {
  text.back() += s;
  return *this;
}

CRow& CRow::add(long v, bool q) {
  slot.push_back(v);
  quoted.push_back(q);
  text.emplace_back();
  return *this;
}

std::string CRow::str() const {
  std::string s = text[0];
  for (size_t k = 0; k < slot.size(); ++k) s += std::to_string(slot[k]) + text[k + 1];
  return s;
}

namespace {

// Rows i and j have the same texts and the same kinds of slot.
bool same_shape(const CRow& a, const CRow& b) {
  return a.group == b.group && a.text == b.text && a.quoted == b.quoted;
}

// The instance of a row: its first quoted slot (-1: none).
long instance(const CRow& r) {
  for (size_t k = 0; k < r.slot.size(); ++k)
    if (r.quoted[k]) return r.slot[k];
  return -1;
}

// The instances that fold from rows[i] in blocks of q rows (one block per instance): row r of
// every block has the shape of rows[i + r], its quoted slots count up by one from block to
// block, every other slot by its step from the first block to the second. 1: none fold.
size_t run_length(const std::vector<CRow>& rows, size_t i, size_t q) {
  if (rows[i].group < 0 || i + 2 * q > rows.size()) return 1;
  const long inst = instance(rows[i]);
  for (size_t r = 0; r < q; ++r) {
    const CRow& a = rows[i + r];
    if (a.group != rows[i].group || !same_shape(a, rows[i + q + r]))
      return 1;
    for (size_t k = 0; k < a.slot.size(); ++k)
      if (a.quoted[k] && a.slot[k] != inst) return 1;
  }
  size_t c = 1;
  for (; i + (c + 1) * q <= rows.size(); ++c) {
    bool ok = true;
    for (size_t r = 0; r < q && ok; ++r) {
      const CRow &a = rows[i + r], &b = rows[i + q + r], &x = rows[i + c * q + r];
      ok = a.group == x.group && same_shape(a, x);
      for (size_t k = 0; k < a.slot.size() && ok; ++k) {
        const long step = a.quoted[k] ? 1 : b.slot[k] - a.slot[k];
        ok = x.slot[k] == a.slot[k] + static_cast<long>(c) * step;
      }
    }
    if (!ok) break;
  }
  return c;
}

// The best fold from rows[i]: {instances, rows per instance}; instances 1 when none folds.
std::pair<size_t, size_t> best_run(const std::vector<CRow>& rows, size_t i) {
  std::pair<size_t, size_t> best{1, 1};
  for (size_t q = 1; q <= 4; ++q) {
    const size_t c = run_length(rows, i, q);
    if (c >= 2 && c * q > best.first * best.second) best = {c, q};
  }
  return best;
}

// The calls of `macro` for the instances [s, e): from 0 to e < 1000 by e's digits (hundreds,
// then tens, then units: as many calls at any depth); otherwise CANNL_REP_* over each aligned
// block of 10, 100 or 1000 instances, the macro itself for the rest.
std::string rep_calls(const std::string& macro, long s, long e) {
  std::string out;
  auto call = [&](const std::string& c) { out += (out.empty() ? "" : " ") + c; };
  if (s == 0 && e < 1000) {
    const long h = e / 100, t = e / 10 % 10, u = e % 10;
    for (long k = 0; k < h; ++k)
      call(k == 0 ? fmt::format("CANNL_REP_H0({})", macro) : fmt::format("CANNL_REP_H({}, {})", macro, k));
    if (t > 0)
      call(h == 0 ? fmt::format("CANNL_REP_F{}({})", t, macro) : fmt::format("CANNL_REP_G{}({}, {})", t, macro, h));
    if (u > 0) call(fmt::format("CANNL_REP_U{}({}, {})", u, macro, e >= 10 ? std::to_string(e / 10) : ""));
    return out;
  }
  static const char* const kLevel[] = {"D", "H", "T"};
  for (long l = s; l < e;) {
    std::string c;
    long size = 1000;
    for (int k = 2; k >= 0 && c.empty(); --k, size /= 10)
      if (l % size == 0 && l + size <= e) {
        c = l == 0 ? fmt::format("CANNL_REP_{}0({})", kLevel[k], macro)
                   : fmt::format("CANNL_REP_{}({}, {})", kLevel[k], macro, l / size);
        l += size;
      }
    call(c.empty() ? fmt::format("{}({})", macro, l++) : c);
  }
  return out;
}

// Rows[i, i + c * q) (c instances of q rows) as one macro of the instance l and its calls.
std::string folded(const std::vector<CRow>& rows, size_t i, size_t c, size_t q, const std::string& indent,
                   const std::string& macro) {
  const long inst = instance(rows[i]);
  const long s = inst >= 0 ? inst : 0;  // the run's first instance (rows without a name: 0)
  std::string body;
  for (size_t r = 0; r < q; ++r) {
    const CRow& a = rows[i + r];
    body += (r ? " " : "") + a.text[0];
    for (size_t k = 0; k < a.slot.size(); ++k) {
      if (a.quoted[k]) {
        body += "\" #l \"";
      } else {
        const long step = rows[i + q + r].slot[k] - a.slot[k], base = a.slot[k] - s * step;
        if (step == 0) body += std::to_string(base);
        else if (step == 1) body += base == 0 ? std::string("l") : fmt::format("{} + l", base);
        else if (base == 0) body += fmt::format("(int64_t)l * {}", step);
        else body += fmt::format("{} + (int64_t)l * {}", base, step);
      }
      body += a.text[k + 1];
    }
  }
  for (const char* empty : {"#l \"\"", "\"\" #l"})  // no empty literal beside #l
    for (size_t at; (at = body.find(empty)) != std::string::npos;) body.replace(at, 5, "#l");
  return fmt::format("#define {}(l) {}\n{}{}\n#undef {}\n", macro, body, indent,
                     rep_calls(macro, s, s + static_cast<long>(c)), macro);
}

}  // namespace

// Buffer b's instance in its stacked storage (lower/roll.h): its slice's index.
long instance_of(const ir::Program& p, int b) {
  const ir::Buffer& v = p.buffers[static_cast<size_t>(b)];
  const ir::Buffer& st = p.buffers[static_cast<size_t>(v.view_of)];
  return v.view_offset / (st.elements() / st.stack);
}

// A name as text, the instance's number in it a quoted slot (its last run of digits that
// spells the instance) when b is a view.
void add_instance_name(CRow& r, const ir::Program& p, int b, const std::string& name) {
  if (p.buffers[static_cast<size_t>(b)].view_of < 0) {
    r.add(name);
    return;
  }
  const std::string inst = std::to_string(instance_of(p, b));
  auto digit = [&](size_t k) { return k < name.size() && name[k] >= '0' && name[k] <= '9'; };
  for (size_t at = name.size(); at-- > 0;) {
    if (!digit(at) || digit(at + 1)) continue;
    size_t from = at;
    while (from > 0 && digit(from - 1)) --from;
    if (name.compare(from, at + 1 - from, inst) == 0) {
      r.add(name.substr(0, from)).add(std::stol(inst), true).add(name.substr(at + 1));
      return;
    }
    at = from;
  }
  r.add(name);
}


std::string fold_rows(const std::vector<CRow>& rows, const std::string& indent, const std::string& macro, bool join) {
  std::string out, line;
  auto flush = [&] {
    if (!line.empty()) out += indent + line + "\n";
    line.clear();
  };
  for (size_t i = 0; i < rows.size();) {
    const auto [c, q] = best_run(rows, i);
    if (c >= 2) {
      flush();
      out += folded(rows, i, c, q, indent, macro);
      i += c * q;
      continue;
    }
    if (join) {
      line += (line.empty() ? "" : " ") + rows[i].str();
    } else {
      line = rows[i].str();
      flush();
    }
    ++i;
  }
  flush();
  return out;
}

CTables c_tables(const ir::Program& p, const std::vector<std::string>& names, const std::set<int>& fielded, bool f64,
                 const std::string& macro, bool params_only) {
  const ir::Buffer* const buf = p.buffers.data();
  const ir::Arena& t = p.layout.training;
  const ir::OptBlock& ob = p.layout.opt_state;
  const long elem = f64 ? 8 : 4;
  CTables out;
  auto param_index = [&](int b) { return std::find(p.params.begin(), p.params.end(), b) - p.params.begin(); };
  // Where state tensor b is (a row's last three values): `buf, 0, at`, at elements into the
  // state's buffer buf (state_bufs' index: its own field, or its stacked buffer's), or for an
  // optimiser-state view without a field `-1, param, at`: its param's index and its byte offset
  // in the whole optimiser-state block.
  std::vector<int> bufs;
  auto where = [&](CRow& r, int b) {
    const ir::Buffer& x = buf[b];
    auto index = [&](int f) {
      auto it = std::find(bufs.begin(), bufs.end(), f);
      if (it == bufs.end()) it = bufs.insert(bufs.end(), f);
      return static_cast<long>(it - bufs.begin());
    };
    if (fielded.count(b) || x.view_of < 0) {
      r.add(fmt::format("{}, 0, 0", index(b)));
    } else if (static_cast<size_t>(b) < ob.field.size() && ob.field[static_cast<size_t>(b)] >= 0) {
      r.add("-1, ").add(param_index(x.state_of)).add(", ").add(ob.field[static_cast<size_t>(b)]);
    } else {
      if (!fielded.count(x.view_of)) CANNL_BUG("a view whose stacked buffer has no field: " + x.name);
      r.add(fmt::format("{}, 0, ", index(x.view_of))).add(x.view_offset);
    }
  };
  std::vector<CRow> info, state, grads, starts;
  for (size_t k = 0; k < p.params.size(); ++k) {
    const int b = p.params[k];
    const ir::Buffer& x = buf[b];
    CRow r;
    r.group = x.view_of;
    r.add("{\"");
    add_instance_name(r, p, b, x.state_name.empty() ? x.name : x.state_name);
    r.add(fmt::format("\", {}, {{ {} }}, {}, {}}},", x.dims.size(), dims_list(x, false), buffer_size(x, false),
                      x.ids));
    info.push_back(r);
    const int g = p.grad(b);
    CRow gr;
    gr.group = x.view_of;
    gr.add(g < 0 ? -1 : (t.field[static_cast<size_t>(g)] - t.grads) / elem).add(",");
    grads.push_back(gr);
    if (!ob.param_start.empty()) {
      CRow sr;
      sr.group = x.view_of;
      sr.add(ob.param_start[k]).add(",");
      starts.push_back(sr);
    }
  }
  if (!ob.param_start.empty()) starts.push_back(CRow().add(ob.param_start.back()).add(","));
  // The state: the params first, in Program::params order (model_io.c reads them so), then the
  // optimiser state, in buffer order (as model_template_data lists it; params_only: none).
  std::vector<int> order;
  std::vector<bool> listed(p.buffers.size(), false);
  for (int b : p.params)
    if (!buf[b].state_name.empty()) order.push_back(b), listed[static_cast<size_t>(b)] = true;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (!params_only && !listed[i] && !p.buffers[i].state_name.empty()) order.push_back(static_cast<int>(i));
  for (int b : order) {
    const ir::Buffer& x = buf[b];
    CRow r;
    r.group = x.view_of;
    r.add("{\"");
    add_instance_name(r, p, b, x.state_name);
    r.add(fmt::format("\", {}, {{ {} }}, ", x.dims.size(), dims_list(x, false)));
    where(r, b);
    r.add("},");
    state.push_back(r);
  }
  out.param_info = fold_rows(info, "    ", macro, false);
  out.state = fold_rows(state, "    ", macro, false);
  std::string line;  // (lines of at most 120 columns)
  for (int b : bufs) {
    const std::string next = "m->" + names[static_cast<size_t>(b)] + ",";
    if (!line.empty() && line.size() + 1 + next.size() > 112) out.state_bufs += line + "\n        ", line.clear();
    line += (line.empty() ? "" : " ") + next;
  }
  out.state_bufs += line + (line.empty() ? "" : " ") + "NULL";
  // The two arrays: one line each (as before blocks), unless a run folds.
  auto array = [&](const std::vector<CRow>& rows, const std::string& none) {
    const std::string folded = fold_rows(rows, "    ", macro, true);
    if (folded.find("#define ") != std::string::npos) return "{\n" + folded + "}";
    std::string s;
    for (const CRow& r : rows) s += (s.empty() ? "" : ", ") + std::to_string(r.slot[0]);
    return "{ " + (s.empty() ? none : s) + " }";
  };
  out.grad_offsets = array(grads, "-1");  // (C has no empty initialiser)
  out.opt_state_start = array(starts, "0");
  return out;
}

}  // namespace cannl
