// c_tables.h — the C target's tables of params and state tensors, a repeat block's instances
// folded (issue 34, "per-instance tables").
//
// Takes: a Program after plan_layout, its C names (emit/c_names.h), and the buffers that keep a
// field of their own in the state (the training state's, or the forward-only state's).
// Guarantees: the text of the tables the runtime reads — param_info's rows, state_tensors' rows
// (checkpoint names and order; the forward-only state's: its params'), grad_offsets and
// opt_state_start — with exactly the values of one row per param (per tensor) that a program
// without blocks prints; the rows of a stacked group's instances (`w_qkv.0` ... `w_qkv.47`,
// consecutive rows that differ only by the instance) printed as one macro X(l) and the
// CANNL_REP_* calls of runtime-lib/cannl_rt.h, so the source grows with the number of decimal
// digits of the depth, not with the depth. A program without stacked storage prints as before,
// row by row. state_tensors' rows are data (a static table the function reads in a loop, so its
// code does not grow with the state either); a view of stacked storage without a field of its
// own is found from its stacked buffer (`m->w_qkv` + 1769472 l), an optimiser-state view from
// its byte offset in the optimiser-state block (NULL unless the state holds its param: ZeRO-1).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace cannl {

// One row of a generated table: text[0] slot[0] text[1] ... slot[n-1] text[n]. A quoted slot is
// an instance's number inside a string literal (the `7` of "w_qkv.7"); rows of one group
// (>= 0) may fold into a macro when their texts are equal, their quoted slots count the
// instances and each other slot steps by a constant.
struct CRow {
  std::vector<std::string> text{""};
  std::vector<long> slot;
  std::vector<bool> quoted;
  int group = -1;

  CRow& add(const std::string& s);        // text
  CRow& add(long v, bool quoted = false);  // a slot
  std::string str() const;                 // the row as written for itself
};

// The rows, each foldable run of two or more as `#define <macro>(l) <row>`, its CANNL_REP_*
// calls and `#undef <macro>` on lines of their own; `indent` before every row. join: the rows
// outside runs on one line, separated by a space (a one-line array stays one line).
std::string fold_rows(const std::vector<CRow>& rows, const std::string& indent, const std::string& macro, bool join);

// A name as text, the instance's number in it a quoted slot (its last run of digits that
// spells the instance: `w_qkv.7`, `w_qkv_7.exp_avg`) when buffer b is a view of stacked storage.
void add_instance_name(CRow& r, const ir::Program& p, int b, const std::string& name);
// Buffer b's instance in its stacked storage (lower/roll.h): its slice's index.
long instance_of(const ir::Program& p, int b);

struct CTables {
  std::string param_info;       // the rows of param_info[] (each ends in a newline)
  std::string state;            // the rows of state_rows[] (each ends in a newline): name, ndims,
                                // shape, then where: buf, param, at (c_tables.cpp)
  std::string state_bufs;       // the state's buffers the rows point into ("m->wte, ..., NULL")
  std::string grad_offsets;     // the initialiser's values ("-1" when there are no params)
  std::string opt_state_start;  // the initialiser's values ("0" when none)
};

// `fielded`: the buffers with a field in the state (a view without one is addressed from its
// stacked buffer). macro: the name of the rows' macro (defined and undefined around each run).
// params_only: the forward-only state's, which holds the params alone: `state` and `state_bufs`
// have the params' rows only (in Program::params order, as param_info's).
CTables c_tables(const ir::Program& p, const std::vector<std::string>& names, const std::set<int>& fielded, bool f64,
                 const std::string& macro, bool params_only = false);

}  // namespace cannl
