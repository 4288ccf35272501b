# Compiles templates/**/*.mustache into the generator: writes templates.cpp with one raw
# string per file, so an installed `cannl` needs no data files.
# Usage: cmake -DROOT=<templates dir> -DOUT=<file.cpp> -P templates.cmake
file(GLOB_RECURSE files RELATIVE ${ROOT} ${ROOT}/*.mustache)
list(SORT files)
set(body "// Generated from templates/ by generator/templates.cmake; do not edit.\n#include <map>\n#include <string>\n\n#include \"emit/c_emit.h\"\n#include \"support/diagnostic.h\"\n\nnamespace cannl {\n\nconst std::string& template_text(const std::string& name) {\n  static const std::map<std::string, std::string> texts = {\n")
foreach(f ${files})
  file(READ ${ROOT}/${f} text)
  string(APPEND body "      {\"${f}\", R\"cannl_template(${text})cannl_template\"},\n")
endforeach()
string(APPEND body "  };\n  auto it = texts.find(name);\n  if (it == texts.end()) CANNL_BUG(\"no template \" + name);\n  return it->second;\n}\n\n}  // namespace cannl\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
