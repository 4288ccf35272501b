# Cannl.cmake — build models from cannl specs in a CMake project.
#
#   cannl_add_model(NAME SPEC [TARGET c] [DTYPE f32|f64] [MAX_BATCH N])
#
# Runs `cannl gen SPEC` at build time (again whenever the spec or the generator changes) into
# ${CMAKE_CURRENT_BINARY_DIR}/cannl/NAME and defines
#   NAME        a static library with the model's C API (<model>.h on its include path)
#   NAME_train  the training program (see `NAME_train --help`)
# plus install rules for both and the header. The generator is the target `cannl` when cannl
# is part of the build (add_subdirectory), else the imported `cannl::cannl` of
# find_package(cannl). Generated code links cannl::rt and, when found, OpenMP.
include_guard(GLOBAL)

option(CANNL_NATIVE "Compile generated models for this machine's CPU (-march=native)" ON)

function(cannl_add_model name spec)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "TARGET;DTYPE;MAX_BATCH" "")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "cannl_add_model(${name}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_TARGET)
    set(ARG_TARGET c)
  endif()
  if(NOT ARG_TARGET STREQUAL "c")
    message(FATAL_ERROR "cannl_add_model(${name}): TARGET ${ARG_TARGET} is not supported (use c)")
  endif()
  if(NOT ARG_DTYPE)
    set(ARG_DTYPE f32)
  endif()
  if(NOT ARG_MAX_BATCH)
    set(ARG_MAX_BATCH 256)
  endif()
  get_filename_component(spec "${spec}" ABSOLUTE)
  if(NOT EXISTS "${spec}")
    message(FATAL_ERROR "cannl_add_model(${name}): no spec file ${spec}")
  endif()
  # The generated files are named after the spec's `model` statement.
  file(STRINGS "${spec}" model_line REGEX "^[ \t]*model[ \t]+[A-Za-z_][A-Za-z0-9_]*" LIMIT_COUNT 1)
  if(NOT model_line)
    message(FATAL_ERROR "cannl_add_model(${name}): ${spec} has no `model NAME` statement")
  endif()
  string(REGEX REPLACE "^[ \t]*model[ \t]+([A-Za-z_][A-Za-z0-9_]*).*" "\\1" model "${model_line}")

  if(TARGET cannl)
    set(generator cannl)
  elseif(TARGET cannl::cannl)
    set(generator cannl::cannl)
  else()
    message(FATAL_ERROR "cannl_add_model(${name}): no cannl generator: add_subdirectory(cannl) or find_package(cannl) first")
  endif()

  set(dir ${CMAKE_CURRENT_BINARY_DIR}/cannl/${name})
  set(outputs ${dir}/${model}.h ${dir}/${model}.c ${dir}/${model}_train.c)
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${generator} gen ${spec} -o ${dir} --dtype ${ARG_DTYPE} --max-batch ${ARG_MAX_BATCH}
    DEPENDS ${spec} ${generator}
    COMMENT "cannl: generating ${name} from ${spec}"
    VERBATIM)

  add_library(${name} STATIC ${dir}/${model}.c ${dir}/${model}.h)
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${dir}> $<INSTALL_INTERFACE:include>)
  target_link_libraries(${name} PUBLIC cannl::rt)
  find_package(OpenMP QUIET COMPONENTS C)
  if(OpenMP_C_FOUND)
    target_link_libraries(${name} PRIVATE OpenMP::OpenMP_C)
  endif()
  set_target_properties(${name} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                        PUBLIC_HEADER ${dir}/${model}.h)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${name} PRIVATE -O3 $<$<BOOL:${CANNL_NATIVE}>:-march=native>)
  endif()

  add_executable(${name}_train ${dir}/${model}_train.c)
  target_link_libraries(${name}_train PRIVATE ${name})
  set_target_properties(${name}_train PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)

  install(TARGETS ${name} ${name}_train
          RUNTIME DESTINATION bin
          ARCHIVE DESTINATION lib
          PUBLIC_HEADER DESTINATION include)
endfunction()
