// defines: bench::store::sha256_hex — SHA-256 (FIPS 180-4) of a byte string, as lower-case hex
#pragma once

#include <string>
#include <string_view>

namespace bench::store {

/// SHA-256 digest of `data` as 64 lower-case hex digits. Used to fingerprint the experiment text
/// of a run, so runs of the same file can be grouped even when its path changes.
std::string sha256_hex(std::string_view data);

}  // namespace bench::store
