// weights.cpp — reading and checking a checkpoint for embedding (see weights.h).
#include "driver/weights.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cannl_rt.h"

namespace cannl {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The name map file: param name -> name in the checkpoint.
bool read_name_map(const ir::Program& p, const std::string& path, std::map<std::string, std::string>& map,
                   std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = fmt::format("{}: cannot open the name map", path);
    return false;
  }
  std::set<std::string> params, targets;
  for (int b : p.params) params.insert(p.buffers[static_cast<size_t>(b)].state_name);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (n == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 byte-order mark
    const std::string text = trim(line.substr(0, line.find('#')));
    if (text.empty()) continue;
    const size_t eq = text.find('=');
    const std::string from = eq == std::string::npos ? "" : trim(text.substr(0, eq));
    std::string to = eq == std::string::npos ? "" : trim(text.substr(eq + 1));
    // `KEY [d0, d1, ...]`: the shape the training program writes the tensor under; any shape of as many
    // elements is read (contract v2 §6).
    if (const size_t gap = to.find_first_of(" \t"); gap != std::string::npos && to.back() == ']' &&
                                                     trim(to.substr(gap)).front() == '[')
      to = to.substr(0, gap);
    if (from.empty() || to.empty() || from.find_first_of(" \t=") != std::string::npos ||
        to.find_first_of(" \t=") != std::string::npos) {
      error = fmt::format("{}: line {}: expected 'cannl_name = file.key', got '{}'", path, n, text);
      return false;
    }
    if (!params.count(from)) {
      error = fmt::format("{}: line {}: '{}' is no param of model '{}'", path, n, from, p.model);
      return false;
    }
    if (map.count(from) || targets.count(to)) {
      error = fmt::format("{}: line {}: '{}' is mapped twice", path, n, map.count(from) ? from : to);
      return false;
    }
    map[from] = to;
    targets.insert(to);
  }
  return true;
}

// The tensor names a safetensors file holds, in the file's order, for an error about a missing
// one (as the programs' loader lists them); empty when the header cannot be read (the reader
// has read it already, so only a file changed meanwhile).
std::string held_names(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char len[8] = {};
  if (!f.read(reinterpret_cast<char*>(len), 8)) return "";
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n > (uint64_t{100} << 20)) return "";
  std::string head(static_cast<size_t>(n), '\0');
  if (!f.read(head.data(), static_cast<std::streamsize>(n))) return "";
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(head, nullptr, false);
  if (!j.is_object()) return "";
  std::string list;
  size_t count = 0;
  for (const auto& item : j.items()) {
    const std::string& name = item.key();
    if (name == "__metadata__") continue;
    if (++count <= 24) list += (list.empty() ? "" : ", ") + name;
  }
  if (count == 0) return "no tensors";
  if (count > 24) list += fmt::format(", ... ({} in all)", count);
  return list;
}

}  // namespace

bool read_weights(const ir::Program& p, const std::string& path, const std::string& name_map, EmbeddedWeights& out,
                  std::string& error) {
  std::map<std::string, std::string> names;
  if (!name_map.empty() && !read_name_map(p, name_map, names, error)) return false;
  cannl_error err{};
  cannl_checkpoint* ck = nullptr;
  if (cannl_checkpoint_open(path.c_str(), nullptr, &ck, &err) != CANNL_OK) {
    error = err.msg;
    return false;
  }
  struct Closer {
    cannl_checkpoint* ck;
    ~Closer() { cannl_checkpoint_close(ck); }
  } closer{ck};
  const char* model = cannl_checkpoint_meta(ck, CANNL_META_MODEL);
  if (model && p.model != model) {
    error = fmt::format("{}: checkpoint of model '{}', but the spec defines model '{}'", path, model, p.model);
    return false;
  }
  const char* step = cannl_checkpoint_meta(ck, CANNL_META_STEP);
  EmbeddedWeights w;
  w.source = std::filesystem::path(path).filename().string();
  w.step = step ? step : "";
  for (int b : p.params) {
    const ir::Buffer& buf = p.buffers[static_cast<size_t>(b)];
    if (buf.dims.size() > CANNL_MAX_DIMS) {
      error = fmt::format("{}: param '{}' has more than {} axes", path, buf.name, CANNL_MAX_DIMS);
      return false;
    }
    std::vector<double> values(static_cast<size_t>(buf.elements()));
    cannl_tensor want{};
    const auto mapped = names.find(buf.state_name);
    want.name = mapped != names.end() ? mapped->second.c_str() : buf.state_name.c_str();
    want.dtype = CANNL_F64;
    want.ndims = static_cast<int32_t>(buf.dims.size());
    for (size_t d = 0; d < buf.dims.size(); ++d) want.shape[d] = buf.dims[d].size;
    want.data = values.data();
    // Through the name map, another shape of the same elements loads (contract v2 §6).
    const cannl_status st =
        mapped != names.end() ? cannl_checkpoint_read_reshaped(ck, &want, &err) : cannl_checkpoint_read(ck, &want, &err);
    if (st != CANNL_OK) {
      error = err.msg;
      if (st == CANNL_E_NOTFOUND && mapped != names.end())
        error += fmt::format(" (param '{}' through the name map {})", buf.state_name, name_map);
      if (const std::string held = st == CANNL_E_NOTFOUND ? held_names(path) : ""; !held.empty())
        error += "; the file holds: " + held;
      return false;
    }
    for (size_t k = 0; k < values.size(); ++k)
      if (!std::isfinite(values[k])) {
        error = fmt::format("{}: param '{}' holds a non-finite value ({}) at element {}", path, buf.state_name,
                            values[k], k);
        return false;
      }
    w.values.push_back(std::move(values));
  }
  out = std::move(w);
  return true;
}

}  // namespace cannl
