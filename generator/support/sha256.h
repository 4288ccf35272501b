// sha256.h — SHA-256 (FIPS 180-4) of a byte string, as 64 lowercase hex digits.
//
// The model card names the spec it was generated from by this hash (`sha256sum SPEC` gives
// the same digits).
#pragma once

#include <string>
#include <string_view>

namespace cannl {

std::string sha256_hex(std::string_view bytes);

}  // namespace cannl
