// `cannl gen SPEC -o DIR`: front end, then the code generator.
#include <ostream>

#include "driver/commands.h"
#include "driver/frontend.h"

namespace cannl {

int gen_file(const std::string& path, const std::string& out_dir, const CheckOptions& opt,
             std::ostream& out, std::ostream& err) {
  (void)out;
  (void)out_dir;
  std::string text, error;
  if (!read_file(path, text, error)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  auto fe = run_frontend(path, text);
  fe->diags.render(err, opt.color);
  if (!fe->ok()) return 1;
  err << "cannl: error: not supported yet: code generation (the C backend is not built yet)\n";
  return 1;
}

}  // namespace cannl
