// defines: bench::safetensors — a strict reader and a writer of the safetensors format
//
// Layout (https://huggingface.co/docs/safetensors, "Format"): an unsigned little-endian 64-bit
// header length N; N bytes of UTF-8 JSON (an object, possibly padded with trailing spaces)
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" object of strings; then the byte buffer. Offsets are relative to the buffer,
// and the tensors must tile it exactly: sorted by offset, each begins where the previous ends,
// the first at 0 and the last at the end of the file (no overlap, no hole, nothing trailing).
// The reader rejects every violation, an unknown dtype, a byte count that disagrees with the
// shape, a duplicate name and a header of absurd length, naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace bench::safetensors {

/// Bytes per element of a safetensors dtype ("F32", "BF16", "I64" ...); 0 for an unknown one.
size_t dtype_bytes(std::string_view dtype);
/// Whether `dtype` is a floating-point type we convert from and to: F64, F32, F16, BF16.
bool is_float(std::string_view dtype);

/// One tensor of a parsed file: its data is bytes [begin, end) of the buffer.
struct TensorInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  int64_t numel() const;
};

/// A parsed file: the tensors in offset order, the metadata, and the whole file's bytes.
struct File {
  std::string origin;  ///< path, for messages
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  std::vector<char> bytes;
  size_t data_start = 0;  ///< 8 + header length

  /// The tensor named `name`, or nullptr.
  const TensorInfo* find(std::string_view name) const;
  /// A float tensor's values, converted exactly to double. Throws for a non-float dtype.
  std::vector<double> values(const TensorInfo& t) const;
};

/// Parse and check a whole file held in memory. Throws bench::Error naming `origin`.
File parse(std::vector<char> bytes, const std::string& origin);
/// Read and parse `path`.
File read(const std::string& path);

/// A tensor to write.
struct OutTensor {
  std::string name;
  std::string dtype;  ///< F64, F32, F16 or BF16
  std::vector<int64_t> shape;
  std::vector<char> data;  ///< little-endian elements, numel * dtype_bytes(dtype) bytes
};

/// Encode values as `dtype` (F64, F32, F16, BF16; rounding to nearest, ties to even).
std::vector<char> encode(const double* values, int64_t n, std::string_view dtype);
/// IEEE binary16 and bfloat16 bit patterns from float, rounding to nearest even, and back.
uint16_t float_to_f16(float f);
uint16_t float_to_bf16(float f);
float f16_to_float(uint16_t h);
float bf16_to_float(uint16_t h);

/// The file's bytes: header (tensors in the given order, padded with spaces to a multiple of
/// 8 bytes so that the buffer is aligned), then the data in the same order.
std::vector<char> serialize(const std::vector<OutTensor>& tensors, const std::map<std::string, std::string>& metadata);
/// serialize() to `path`, written to a temporary name and renamed, so a reader never sees half a file.
void write(const std::string& path, const std::vector<OutTensor>& tensors,
           const std::map<std::string, std::string>& metadata);

}  // namespace bench::safetensors
