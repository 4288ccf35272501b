// weights.h — a checkpoint's trained params, read and checked against a model for
// `cannl gen --weights CKPT --embed`.
//
// Takes a Program and a safetensors file. Guarantees: on success every param's values in
// storage order (float64 or float32 tensors, converted as the runtime's loader converts them),
// the checkpoint's "step"; on failure one message naming the file and the problem (not a
// safetensors file, a checkpoint of another model, a missing param (listing the tensors the
// file holds), a shape that differs from the spec's, a non-finite value) and nothing else.
// Reads through the C runtime's checkpoint reader, so a file `<model>_infer --weights`
// accepts is accepted here and vice versa. With a name map (a file of `cannl_name = file.key`
// lines, `#` comments, as `--name-map` of the programs), a param is read under the name it
// maps to; a bad line, a name that is no param, a name mapped twice are errors naming the map.
#pragma once

#include <string>

#include "emit/c_emit.h"
#include "ir/ir.h"

namespace cannl {

bool read_weights(const ir::Program& p, const std::string& path, const std::string& name_map, EmbeddedWeights& out,
                  std::string& error);

}  // namespace cannl
