// defines: bench::sha256_hex — SHA-256 (FIPS 180-4) of a byte string, as lower-case hex
#pragma once

#include <string>
#include <string_view>

namespace bench {

/// SHA-256 digest of `data` as 64 lower-case hex digits. Fingerprints the experiment text of a run
/// (runs of one file are grouped even when its path changes), artifacts, and the inputs of
/// anything a plugin caches by content (a dataset's trained tokenizer).
std::string sha256_hex(std::string_view data);

}  // namespace bench
