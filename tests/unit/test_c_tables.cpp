// emit/c_tables: a run of table rows that differ only by the instance folds into one macro and
// the repetition macros of cannl_rt.h; anything else stays row by row, exactly as written.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "emit/c_tables.h"

using namespace cannl;

namespace {

// Row l of a param_info-like table: {"w.l", 3, base + l * step},
CRow row(long l, long base, long step, int group = 0) {
  CRow r;
  r.group = group;
  r.add("{\"w.").add(l, true).add("\", 3, ").add(base + l * step).add("},");
  return r;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("c_tables: a block's rows fold into CANNL_REP_* by the depth's digits", "[emit]") {
  for (long depth : {2L, 7L, 10L, 12L, 48L, 148L, 1200L}) {
    INFO("depth " << depth);
    std::vector<CRow> rows;
    for (long l = 0; l < depth; ++l) rows.push_back(row(l, 100, 7));
    const std::string s = fold_rows(rows, "    ", "M_ROW", false);
    CHECK(s.find("#define M_ROW(l) {\"w.\" #l, 3, 100 + (int64_t)l * 7},\n") == 0);
    CHECK(s.find("#undef M_ROW\n") != std::string::npos);
    CHECK(count(s, "\n") == 3);  // whatever the depth
  }
  std::vector<CRow> rows;
  for (long l = 0; l < 48; ++l) rows.push_back(row(l, 0, 5));
  CHECK(fold_rows(rows, "", "R", false) ==
        "#define R(l) {\"w.\" #l, 3, (int64_t)l * 5},\nCANNL_REP_F4(R) CANNL_REP_U8(R, 4)\n#undef R\n");
  rows.resize(7);
  CHECK(fold_rows(rows, "", "R", false) ==
        "#define R(l) {\"w.\" #l, 3, (int64_t)l * 5},\nCANNL_REP_U7(R, )\n#undef R\n");
}

TEST_CASE("c_tables: rows that are not one run stay as written", "[emit]") {
  // no group, a single instance, a step that changes, another group
  std::vector<CRow> rows = {row(0, 1, 1, -1), row(1, 1, 1, -1)};
  CHECK(fold_rows(rows, "", "R", false) == "{\"w.0\", 3, 1},\n{\"w.1\", 3, 2},\n");
  rows = {row(0, 1, 1)};
  CHECK(fold_rows(rows, "", "R", false) == "{\"w.0\", 3, 1},\n");
  rows = {row(0, 0, 4), row(1, 0, 4), row(2, 0, 5), row(3, 5, 1, 1)};  // 0, 4, 10, 8
  const std::string s = fold_rows(rows, "", "R", false);
  CHECK(s.find("CANNL_REP_U2(R, )") != std::string::npos);  // rows 0 and 1
  CHECK(s.find("{\"w.2\", 3, 10},\n{\"w.3\", 3, 8},\n") != std::string::npos);
  // rows of two per instance (an optimiser state's two tensors) fold together
  rows.clear();
  for (long l = 0; l < 12; ++l) {
    CRow a, b;
    a.group = b.group = 3;
    a.add("{\"w_").add(l, true).add(".m\", ").add(10 + 2 * l).add("},");
    b.add("{\"w_").add(l, true).add(".v\", ").add(11 + 2 * l).add("},");
    rows.push_back(a);
    rows.push_back(b);
  }
  CHECK(fold_rows(rows, "", "R", false) == "#define R(l) {\"w_\" #l \".m\", 10 + (int64_t)l * 2}, {\"w_\" #l \".v\", "
                                           "11 + (int64_t)l * 2},\nCANNL_REP_F1(R) CANNL_REP_U2(R, 1)\n#undef R\n");
  // a one-line array keeps its rows outside runs on one line
  std::vector<CRow> nums;
  for (long v : {0L, 9L}) nums.push_back(CRow().add(v).add(","));
  CHECK(fold_rows(nums, "    ", "R", true) == "    0, 9,\n");
}
