// routines.h — the whole program: forward nests, gradients and updates grouped in routines.
//
// Takes: a Model and ShapeInfo without errors. Guarantees: a Program whose routines are
//   init          params from their initialisers (in declaration order, one random stream),
//                 optimiser state zeroed;
//   train_step    forward nests the loss needs, the backward nests, the optimiser update
//                 (OCANNL's monolithic step);
//   forward       the nests the outputs need (inference);
//   eval_metrics  the nests the loss and the metrics need;
// with every nest's loops ordered by passes/loop_order.
#pragma once

#include "ir/ir.h"
#include "shapes/infer.h"
#include "spec/model.h"

namespace cannl {

struct ProgramOptions {
  long max_batch = 256;
};

ir::Program build_program(const Model& m, const ShapeInfo& shapes, const SourceFile& file,
                          const ProgramOptions& opt);

}  // namespace cannl
