// weights.cpp — reading and checking a checkpoint for embedding (see weights.h).
#include "driver/weights.h"

#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "cannl_rt.h"

namespace cannl {

bool read_weights(const ir::Program& p, const std::string& path, EmbeddedWeights& out, std::string& error) {
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
    want.name = buf.state_name.c_str();
    want.dtype = CANNL_F64;
    want.ndims = static_cast<int32_t>(buf.dims.size());
    for (size_t d = 0; d < buf.dims.size(); ++d) want.shape[d] = buf.dims[d].size;
    want.data = values.data();
    if (cannl_checkpoint_read(ck, &want, &err) != CANNL_OK) {
      error = err.msg;
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
