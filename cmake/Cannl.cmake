# Cannl.cmake — build models from cannl specs in a CMake project.
#
#   cannl_add_model(NAME SPEC [TARGET c|cuda] [DTYPE f32|f64] [PRECISION fp32|tf32|bf16] [MAX_BATCH N]
#                   [WEIGHTS CKPT] [QUANTIZE int8] [BLAS] [NO_INSTALL] [MPI|NO_MPI] [NO_NCCL] [DIMS NAME=VALUE...] [GEN_ARGS arg...])
#
# QUANTIZE int8 (`cannl gen --quantize int8`; TARGET c, DTYPE f32): the inference and decode
# routines read the weight matrices and embedding tables as int8 rows with a float scale per
# row, quantised from the params when they are loaded (with WEIGHTS: compiled in as int8).
#
# PRECISION (DTYPE f32) is `cannl gen --precision`: bf16 for TARGET c runs the training state's
# matrix products in bf16 with fp32 sums on a CPU with AVX512_BF16 (fp32 elsewhere, said at start);
# TARGET cuda below.
#
# DIMS NAME=VALUE... overrides the spec's `dim NAME` with VALUE (`cannl gen --dim`), e.g. a
# shorter context for a CPU build of a large model: DIMS ctx=64 layers=2.
#
# Runs `cannl gen SPEC` at build time into ${CMAKE_CURRENT_BINARY_DIR}/cannl/NAME, again
# whenever the spec or the generator changes, and defines
#   NAME        a static library with the model's C API (<model>.h on its include path;
#               <model> is the name in the spec's `model` statement, it names the header
#               and the C symbols), linked to cannl::rt and, when found, OpenMP
#   NAME_train  the training program (`NAME_train --help`); data-parallel under mpirun when
#               cannl was built where CMake finds MPI (cannl::rt_mpi; MPI: required, NO_MPI:
#               never; docs/distributed.md)
#   NAME_infer  the inference program (`NAME_infer --help`): forward only, params from
#               --weights, or compiled in with WEIGHTS
# and install rules for both and the header (bin/, lib/, include/ of GNUInstallDirs), unless
# NO_INSTALL or the variable CANNL_INSTALL_MODELS is false (cannl's own build sets it, so its
# examples and test models stay out of `cmake --install`). DTYPE (default f32) and MAX_BATCH
# (default 256) are `cannl gen --dtype` and `--max-batch`; GEN_ARGS are more `cannl gen`
# options (e.g. -O0, --disable-pass=fuse); WEIGHTS CKPT (a safetensors checkpoint) compiles the trained params into the library
# and NAME_infer (`cannl gen --weights CKPT --embed`, in two runs: the model compiled once
# from the spec, `--weights-apart`, and the params into <model>_weights.c, `--weights-only`,
# checked against the spec; a changed CKPT regenerates and recompiles that file alone). BLAS is `cannl gen --blas`: the matrix products call
# cblas (OpenBLAS, found with find_package(BLAS) and BLA_VENDOR OpenBLAS; NAME then links BLAS::BLAS). A changed spec also re-runs CMake (the model's name may have changed). The model is
# compiled as its generated CMakeLists.txt compiles it (templates/c/CMakeLists.txt.mustache):
# -O3 with reassociation allowed, for any x86-64: the routines are compiled for AVX-512, AVX2 +
# FMA and the baseline and the loader picks one for the CPU it runs on (CANNL_MULTIVERSION in
# cannl_rt.h), the runtime's matrix products likewise (runtime-lib/gemm.c); with CANNL_NATIVE,
# -march=native instead (for this machine's CPU only: the programs may not run on another).
#
# TARGET cuda (`cannl gen --target cuda`): the same library API and training program, running
# on one NVIDIA GPU: <model>.cu and <model>_train.cu compiled by nvcc (-O3 and the list
# CANNL_CUDA_FLAGS, e.g. -Werror all-warnings), linked to cannl::cuda_rt, cuBLAS and the CUDA
# runtime (shared, or static when the variable CANNL_CUDART is `static`, as cannl's own build
# option of that name; an installed cannl sets it to how it was built). Needs the CUDA language enabled (project(... CUDA) or enable_language(CUDA), with
# CMAKE_CUDA_ARCHITECTURES set as you need) and the target cannl::cuda_rt. NAME_infer runs the
# model forward on the GPU (`--generate` re-runs the forward pass per token: no KV cache on the
# GPU yet); it takes no WEIGHTS (nothing compiled in). PRECISION (TARGET cuda, DTYPE f32 only) is `cannl gen
# --precision`: the matrix products on the CUDA cores in fp32 (the default), or on the tensor
# cores in TF32 or bf16 with fp32 accumulation; params, optimiser state and checkpoints stay fp32. Its training program is data-parallel under mpirun
# as the C target's (MPI and NO_MPI alike), one GPU per rank: the gradients all-reduced on the
# GPUs by NCCL when cannl found NCCL (cannl::cuda_rt_nccl), else, or with NO_NCCL, through MPI
# on host buffers (cannl::cuda_rt_mpi; docs/distributed.md, "GPUs").
#
# Getting it into a project, either
#   add_subdirectory(path/to/cannl)   # builds the generator and the runtime with the project
# or, after `cmake --install <cannl build> --prefix P`,
#   find_package(cannl REQUIRED)      # with -DCMAKE_PREFIX_PATH=P; imports cannl::cannl (the
#                                     # generator), cannl::rt (the runtime) and this file
# then
#   cannl_add_model(mymodel mymodel.cannl)
#   target_link_libraries(myapp PRIVATE mymodel)   # #include "<model>.h"
#
# Options:
#   CANNL_NATIVE     compile models with -march=native, for the CPU of the machine that builds
#                    them only (default OFF: the programs run on any x86-64, at full speed on
#                    AVX-512 and AVX2 + FMA CPUs)
#   CANNL_GENERATOR  a `cannl` executable to run instead of the target cannl::cannl (a host
#                    build when cross-compiling, or a prebuilt one to save building it; with
#                    add_subdirectory(path/to/cannl EXCLUDE_FROM_ALL) the generator is then
#                    not built at all)
# and the variable CANNL_MODEL_OPTIMIZE (default -O3): the optimisation level models' C is
# compiled at (cannl's own sanitizer build sets -O1: its test models compile faster there, and
# what the sanitizers look for does not depend on it).
include_guard(GLOBAL)
include(GNUInstallDirs)

option(CANNL_NATIVE "Compile generated models for this machine's CPU only (-march=native)" OFF)
set(CANNL_GENERATOR "" CACHE FILEPATH
    "A cannl executable for cannl_add_model to run instead of the target cannl::cannl")

function(cannl_add_model name spec)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "NO_INSTALL;BLAS;MPI;NO_MPI;NO_NCCL" "TARGET;DTYPE;PRECISION;MAX_BATCH;WEIGHTS;QUANTIZE" "GEN_ARGS;DIMS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "cannl_add_model(${name}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  foreach(dim IN LISTS ARG_DIMS)  # DIMS NAME=VALUE...: cannl gen --dim NAME=VALUE
    if(NOT dim MATCHES "^[A-Za-z_][A-Za-z0-9_]*=[0-9]+$")
      message(FATAL_ERROR "cannl_add_model(${name}): DIMS ${dim}: expected NAME=VALUE, e.g. DIMS ctx=64")
    endif()
    list(APPEND ARG_GEN_ARGS --dim ${dim})
  endforeach()
  if(NOT ARG_TARGET)
    set(ARG_TARGET c)
  endif()
  if(NOT ARG_TARGET MATCHES "^(c|cuda)$")
    message(FATAL_ERROR "cannl_add_model(${name}): TARGET ${ARG_TARGET} is not supported (use c or cuda)")
  endif()
  if(ARG_TARGET STREQUAL "cuda")
    if(NOT CMAKE_CUDA_COMPILER)
      message(FATAL_ERROR "cannl_add_model(${name}): TARGET cuda needs the CUDA language: enable_language(CUDA) first")
    endif()
    if(NOT TARGET cannl::cuda_rt)
      message(FATAL_ERROR "cannl_add_model(${name}): TARGET cuda needs cannl::cuda_rt (cannl built with the CUDA toolkit)")
    endif()
  endif()
  if(NOT ARG_DTYPE)
    set(ARG_DTYPE f32)
  endif()
  if(NOT ARG_DTYPE MATCHES "^(f32|f64)$")
    message(FATAL_ERROR "cannl_add_model(${name}): DTYPE ${ARG_DTYPE} is not supported (use f32 or f64)")
  endif()
  if(ARG_PRECISION)
    if(NOT ARG_PRECISION MATCHES "^(fp32|tf32|bf16)$")
      message(FATAL_ERROR "cannl_add_model(${name}): PRECISION ${ARG_PRECISION} is not supported (use fp32, tf32 or bf16)")
    endif()
    if(NOT ARG_DTYPE STREQUAL "f32" OR (ARG_PRECISION STREQUAL "tf32" AND NOT ARG_TARGET STREQUAL "cuda"))
      message(FATAL_ERROR "cannl_add_model(${name}): PRECISION is for DTYPE f32 only, tf32 for TARGET cuda only")
    endif()
    list(APPEND ARG_GEN_ARGS --precision ${ARG_PRECISION})
  endif()
  if(ARG_QUANTIZE)
    if(NOT ARG_QUANTIZE STREQUAL "int8")
      message(FATAL_ERROR "cannl_add_model(${name}): QUANTIZE ${ARG_QUANTIZE} is not supported (use int8)")
    endif()
    if(NOT ARG_TARGET STREQUAL "c" OR NOT ARG_DTYPE STREQUAL "f32" OR ARG_BLAS)
      message(FATAL_ERROR "cannl_add_model(${name}): QUANTIZE is for TARGET c with DTYPE f32, without BLAS")
    endif()
    list(APPEND ARG_GEN_ARGS --quantize ${ARG_QUANTIZE})
  endif()
  if(NOT DEFINED ARG_MAX_BATCH)  # (MAX_BATCH 0 is an error, not the default)
    set(ARG_MAX_BATCH 256)
  endif()
  if(NOT ARG_MAX_BATCH MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "cannl_add_model(${name}): MAX_BATCH ${ARG_MAX_BATCH}: expected a positive integer (cannl gen --max-batch)")
  endif()
  get_filename_component(spec "${spec}" ABSOLUTE)
  if(NOT EXISTS "${spec}")
    message(FATAL_ERROR "cannl_add_model(${name}): no spec file ${spec}")
  endif()
  # The generated files are named after the spec's `model` statement; read it again whenever
  # the spec changes.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${spec}")
  file(STRINGS "${spec}" model_line REGEX "^[ \t]*model[ \t]+[A-Za-z_][A-Za-z0-9_]*" LIMIT_COUNT 1)
  if(NOT model_line)
    message(FATAL_ERROR "cannl_add_model(${name}): ${spec} has no `model NAME` statement")
  endif()
  string(REGEX REPLACE "^[ \t]*model[ \t]+([A-Za-z_][A-Za-z0-9_]*).*" "\\1" model "${model_line}")

  # The generator: CANNL_GENERATOR, else cannl::cannl, which is an alias of the target `cannl`
  # under add_subdirectory (a target-level and file-level dependency) and an imported
  # executable under find_package (a file-level dependency on the installed program).
  if(CANNL_GENERATOR)
    set(generator "${CANNL_GENERATOR}")
    set(generator_dep "${CANNL_GENERATOR}")
  elseif(TARGET cannl::cannl)
    get_target_property(aliased cannl::cannl ALIASED_TARGET)
    if(aliased)
      set(generator ${aliased})
      set(generator_dep ${aliased})
    else()
      set(generator cannl::cannl)
      set(generator_dep $<TARGET_FILE:cannl::cannl>)
    endif()
  else()
    message(FATAL_ERROR "cannl_add_model(${name}): no cannl generator: add_subdirectory(path/to/cannl) or find_package(cannl) first")
  endif()

  set(blas_flag)
  if(ARG_BLAS)
    set(blas_flag --blas)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/cannl/${name})
  if(ARG_TARGET STREQUAL "cuda")
    if(ARG_WEIGHTS)
      message(FATAL_ERROR "cannl_add_model(${name}): WEIGHTS is for TARGET c only")
    endif()
    set(outputs ${dir}/${model}.h ${dir}/${model}.cu ${dir}/${model}_train.cu ${dir}/${model}_infer.cu)
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
      COMMAND ${generator} gen ${spec} -o ${dir} --dtype ${ARG_DTYPE} --max-batch ${ARG_MAX_BATCH} --target cuda ${ARG_GEN_ARGS}
      DEPENDS ${spec} ${generator_dep}
      COMMENT "cannl: generating ${name} from ${spec}"
      VERBATIM)
    find_package(CUDAToolkit REQUIRED)
    add_library(${name} STATIC ${dir}/${model}.cu ${dir}/${model}.h)
    target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${dir}>
                               $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    set(cudart CUDA::cudart)
    if(CANNL_CUDART STREQUAL "static")
      set(cudart CUDA::cudart_static)
    endif()
    target_link_libraries(${name} PUBLIC cannl::rt cannl::cuda_rt CUDA::cublas ${cudart})
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 ${CANNL_CUDA_FLAGS}>)
    set_target_properties(${name} PROPERTIES PUBLIC_HEADER ${dir}/${model}.h CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                          CUDA_EXTENSIONS OFF)
    add_executable(${name}_train ${dir}/${model}_train.cu)
    target_link_libraries(${name}_train PRIVATE ${name})
    target_compile_options(${name}_train PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${CANNL_CUDA_FLAGS}>)
    set_target_properties(${name}_train PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
    add_executable(${name}_infer ${dir}/${model}_infer.cu)
    target_link_libraries(${name}_infer PRIVATE ${name})
    target_compile_options(${name}_infer PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${CANNL_CUDA_FLAGS}>)
    set_target_properties(${name}_infer PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
    set(dist "")
    if(TARGET cannl::cuda_rt_nccl AND NOT ARG_NO_NCCL)
      set(dist cannl::cuda_rt_nccl)
    elseif(TARGET cannl::cuda_rt_mpi)
      set(dist cannl::cuda_rt_mpi)
    endif()
    if(ARG_MPI AND NOT dist)
      message(FATAL_ERROR "cannl_add_model(${name}): MPI needs cannl::cuda_rt_mpi (cannl built where CMake finds MPI)")
    endif()
    if(dist AND NOT ARG_NO_MPI)
      target_link_libraries(${name}_train PRIVATE ${dist})
      target_compile_definitions(${name}_train PRIVATE CANNL_HAVE_MPI)
    endif()
    if(NOT ARG_NO_INSTALL AND (NOT DEFINED CANNL_INSTALL_MODELS OR CANNL_INSTALL_MODELS))
      install(TARGETS ${name} ${name}_train ${name}_infer
              RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
              ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
              PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    endif()
    return()
  endif()

  set(outputs ${dir}/${model}.h ${dir}/${model}.c ${dir}/${model}_inference.c ${dir}/${model}_train.c
              ${dir}/${model}_infer.c ${dir}/${model}.json)
  set(sources ${dir}/${model}.c ${dir}/${model}_inference.c)
  # WEIGHTS: the model's files come from the spec alone (`cannl gen --weights-apart`) and are
  # compiled once; the params from the checkpoint (`--weights CKPT --embed --weights-only`)
  # into <model>_weights.c, an object of its own in the library, so that a new checkpoint
  # regenerates and recompiles that one file and relinks. A --name-map of GEN_ARGS goes to the
  # second run, which reads the checkpoint.
  set(model_args ${ARG_GEN_ARGS})
  set(weights_args "")
  if(ARG_WEIGHTS)
    get_filename_component(weights "${ARG_WEIGHTS}" ABSOLUTE)
    set(model_args --weights-apart)
    set(map_next FALSE)
    foreach(arg IN LISTS ARG_GEN_ARGS)
      if(map_next OR arg MATCHES "^--name-map(=|$)")
        list(APPEND weights_args ${arg})
        set(map_next FALSE)
        if(arg STREQUAL "--name-map")
          set(map_next TRUE)
        endif()
      else()
        list(APPEND model_args ${arg})
      endif()
    endforeach()
  endif()
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${generator} gen ${spec} -o ${dir} --dtype ${ARG_DTYPE} --max-batch ${ARG_MAX_BATCH} ${blas_flag} ${model_args}
    DEPENDS ${spec} ${generator_dep}
    COMMENT "cannl: generating ${name} from ${spec}"
    VERBATIM)
  if(ARG_WEIGHTS)
    list(FILTER model_args EXCLUDE REGEX "^--weights-apart$")
    add_custom_command(
      OUTPUT ${dir}/${model}_weights.c
      COMMAND ${generator} gen ${spec} -o ${dir} --dtype ${ARG_DTYPE} --max-batch ${ARG_MAX_BATCH} ${blas_flag} ${model_args}
              --weights ${weights} --embed --weights-only ${weights_args}
      # (after the model's files, which share the directory)
      DEPENDS ${spec} ${generator_dep} ${weights} ${dir}/${model}.h
      COMMENT "cannl: compiling the params of ${ARG_WEIGHTS} into ${name}"
      VERBATIM)
    list(APPEND sources ${dir}/${model}_weights.c)
  endif()

  add_library(${name} STATIC ${sources} ${dir}/${model}.h)
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${dir}>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PUBLIC cannl::rt)
  find_package(OpenMP QUIET COMPONENTS C)
  if(OpenMP_C_FOUND)
    target_link_libraries(${name} PRIVATE OpenMP::OpenMP_C)
  endif()
  if(ARG_BLAS)
    set(BLA_VENDOR OpenBLAS)
    find_package(BLAS REQUIRED)
    target_link_libraries(${name} PUBLIC BLAS::BLAS)
  endif()
  set_target_properties(${name} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                        PUBLIC_HEADER ${dir}/${model}.h)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    set(opt -O3)
    if(DEFINED CANNL_MODEL_OPTIMIZE)
      set(opt ${CANNL_MODEL_OPTIMIZE})
    endif()
    target_compile_options(${name} PRIVATE ${opt}
      # Let the compiler reorder sums (vectorised reductions): results stay the same run to
      # run and for any thread count, but may differ in the last bits from another build.
      -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math
      $<$<BOOL:${CANNL_NATIVE}>:-march=native>)
  endif()

  add_executable(${name}_train ${dir}/${model}_train.c)
  target_link_libraries(${name}_train PRIVATE ${name})
  set_target_properties(${name}_train PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  # Data-parallel training over MPI when cannl was built with it (cannl::rt_mpi): the program
  # runs alone or under mpirun. MPI: required; NO_MPI: one process only.
  if(ARG_MPI AND NOT TARGET cannl::rt_mpi)
    message(FATAL_ERROR "cannl_add_model(${name}): MPI needs cannl::rt_mpi (cannl built where CMake finds MPI)")
  endif()
  if(TARGET cannl::rt_mpi AND NOT ARG_NO_MPI)
    target_link_libraries(${name}_train PRIVATE cannl::rt_mpi)
    target_compile_definitions(${name}_train PRIVATE CANNL_HAVE_MPI)
  endif()

  add_executable(${name}_infer ${dir}/${model}_infer.c)
  target_link_libraries(${name}_infer PRIVATE ${name})
  set_target_properties(${name}_infer PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)

  if(NOT ARG_NO_INSTALL AND (NOT DEFINED CANNL_INSTALL_MODELS OR CANNL_INSTALL_MODELS))
    install(TARGETS ${name} ${name}_train ${name}_infer
            RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endfunction()
