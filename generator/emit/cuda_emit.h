// cuda_emit.h — the CUDA back end: a Program as CUDA C++ for one NVIDIA GPU.
//
// Takes: a Program after the passes (driver/compile.cpp), optimised or not (zero_first and fused nests),
// its layout (Program::layout.training: the device arena, sized at run time for the state's
// max_batch as the C target's states are). Guarantees:
// the files of generated/<model>/cuda/ — <model>.h (the C target's API without its
// forward-only state <model>_infer_*), <model>.cu (kernels, routines and
// the API), <model>_train.cu (the training program, the C target's command line) and
// CMakeLists.txt — rendered from templates/cuda/*.mustache and templates/c/model.h.mustache.
// Each loop nest of train_step, forward and eval_metrics becomes one kernel with its bounds,
// strides and launch geometry as constants (only the batch count n is passed), or, when it is
// a contraction (cublas_plan.h), one cublasGemmStridedBatchedEx call. Nests that sum (max=,
// min=) over trailing loops give each written element one thread, one warp or one block,
// reducing with warp shuffles and shared memory; nests whose writes may collide (the input
// gradient of a convolution) add atomically. The init routine runs on the host, printed as
// the C target prints it, so a seed gives the C target's params. Compiles warning-free with
// nvcc -Werror all-warnings and the host compiler's -Wall -Wextra.
#pragma once

#include <string>
#include <vector>

#include "emit/c_emit.h"
#include "ir/ir.h"

namespace cannl {

struct CudaOptions {
  bool f64 = false;  // element type double instead of float (cuBLAS in double too)
  // The matrix products' arithmetic (f32 only): "fp32" (CUDA cores), "tf32" (TF32 tensor cores)
  // or "bf16" (operands rounded to bf16 on the tensor cores, fp32 accumulation); every buffer
  // stays in the element type either way.
  std::string precision = "fp32";
  std::string spec;  // the spec's path as shown in comments
};

std::vector<OutputFile> emit_cuda(const ir::Program& p, const CudaOptions& opt);

}  // namespace cannl
