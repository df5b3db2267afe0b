#include "model/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "bench/error.h"

namespace bench::safetensors {

namespace {

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeader = 100'000'000;

struct DTypeRow {
  std::string_view name;
  size_t bytes;
};
constexpr DTypeRow kDTypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                                {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error(origin + ": not a valid safetensors file: " + what);
}

uint64_t checked_numel(const std::vector<int64_t>& shape, const std::string& origin, const std::string& name) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    const auto u = static_cast<uint64_t>(d);
    if (u != 0 && n > UINT64_MAX / u) fail(origin, "tensor '" + name + "': shape overflows");
    n *= u;
  }
  return n;
}

TensorInfo parse_entry(const std::string& name, const nlohmann::json& e, const std::string& origin) {
  const std::string where = "tensor '" + name + "'";
  if (!e.is_object()) fail(origin, where + " is not an object");
  for (const auto& [key, value] : e.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(origin, where + " has unknown key '" + key + "'");
  if (!e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    fail(origin, where + " needs dtype, shape and data_offsets");
  TensorInfo t;
  t.name = name;
  if (!e["dtype"].is_string()) fail(origin, where + ": dtype is not a string");
  t.dtype = e["dtype"].get<std::string>();
  if (dtype_bytes(t.dtype) == 0) fail(origin, where + ": unknown dtype '" + t.dtype + "'");
  if (!e["shape"].is_array()) fail(origin, where + ": shape is not an array");
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) fail(origin, where + ": shape entries must be non-negative integers");
    const auto v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) fail(origin, where + ": shape entry too large");
    t.shape.push_back(static_cast<int64_t>(v));
  }
  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(origin, where + ": data_offsets must be [begin, end], non-negative integers");
  t.begin = off[0].get<uint64_t>();
  t.end = off[1].get<uint64_t>();
  if (t.end < t.begin) fail(origin, where + ": data_offsets end before they begin");
  const uint64_t n = checked_numel(t.shape, origin, name);
  const size_t es = dtype_bytes(t.dtype);
  if (n > UINT64_MAX / es || t.end - t.begin != n * es)
    fail(origin, where + ": data_offsets span " + std::to_string(t.end - t.begin) + " bytes but shape and dtype need " +
                     std::to_string(n * es));
  return t;
}

template <class U>
U load_le(const char* p) {
  U v;
  std::memcpy(&v, p, sizeof v);
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so is every target");
  return v;
}

}  // namespace

size_t dtype_bytes(std::string_view dtype) {
  for (const DTypeRow& r : kDTypes)
    if (r.name == dtype) return r.bytes;
  return 0;
}

bool is_float(std::string_view dtype) { return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16"; }

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const TensorInfo* File::find(std::string_view name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<double> File::values(const TensorInfo& t) const {
  if (!is_float(t.dtype))
    throw Error(origin + ": tensor '" + t.name + "' has dtype " + t.dtype + ", not a float type (F64, F32, F16, BF16)");
  const int64_t n = t.numel();
  const char* p = bytes.data() + data_start + t.begin;
  std::vector<double> out(static_cast<size_t>(n));
  const size_t es = dtype_bytes(t.dtype);
  for (int64_t i = 0; i < n; ++i) {
    const char* e = p + static_cast<size_t>(i) * es;
    double v = 0;
    if (t.dtype == "F64") {
      v = std::bit_cast<double>(load_le<uint64_t>(e));
    } else if (t.dtype == "F32") {
      v = std::bit_cast<float>(load_le<uint32_t>(e));
    } else if (t.dtype == "F16") {
      v = f16_to_float(load_le<uint16_t>(e));
    } else {
      v = bf16_to_float(load_le<uint16_t>(e));
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

File parse(std::vector<char> bytes, const std::string& origin) {
  File f;
  f.origin = origin;
  if (bytes.size() < 8) fail(origin, "shorter than the 8-byte header length");
  const auto n = load_le<uint64_t>(bytes.data());
  if (n > kMaxHeader) fail(origin, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > bytes.size() - 8)
    fail(origin, "header length " + std::to_string(n) + " runs past the end of the file (" +
                     std::to_string(bytes.size()) + " bytes)");
  if (n < 2 || bytes[8] != '{') fail(origin, "the header does not start with '{'");
  const char* begin = bytes.data() + 8;
  // Duplicate names are ambiguous: the JSON library would keep the last silently.
  std::set<std::string> seen;
  std::string duplicate;
  const nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t ev,
                                                   nlohmann::json& parsed) {
    if (depth == 1 && ev == nlohmann::json::parse_event_t::key && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(begin, begin + n, cb);
  } catch (const nlohmann::json::exception& e) {
    fail(origin, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(origin, "the header is not a JSON object");
  if (!duplicate.empty()) fail(origin, "tensor '" + duplicate + "' appears twice in the header");
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(origin, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(origin, "__metadata__ value of '" + mk + "' is not a string");
        f.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    f.tensors.push_back(parse_entry(key, value, origin));
  }
  std::sort(f.tensors.begin(), f.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  f.data_start = 8 + static_cast<size_t>(n);
  const uint64_t buffer = bytes.size() - f.data_start;
  uint64_t expected = 0;
  for (const TensorInfo& t : f.tensors) {
    if (t.begin < expected) fail(origin, "tensor '" + t.name + "' overlaps the tensor before it in the buffer");
    if (t.begin > expected)
      fail(origin, "tensor '" + t.name + "' begins at byte " + std::to_string(t.begin) +
                       ", leaving a hole after byte " + std::to_string(expected));
    if (t.end > buffer)
      fail(origin, "tensor '" + t.name + "' ends at byte " + std::to_string(t.end) + ", past the end of the buffer (" +
                       std::to_string(buffer) + " bytes)");
    expected = t.end;
  }
  if (expected != buffer)
    fail(origin, std::to_string(buffer - expected) + " bytes after the last tensor belong to no tensor");
  f.bytes = std::move(bytes);
  return f;
}

File read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": read failed");
  return parse(std::move(bytes), path);
}

uint16_t float_to_bf16(float f) {
  const auto x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffU) > 0x7f800000U) return static_cast<uint16_t>((x >> 16) | 0x40U);  // quiet NaN
  const uint32_t rounding = 0x7fffU + ((x >> 16) & 1U);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t float_to_f16(float f) {
  const auto x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000U;
  const uint32_t a = x & 0x7fffffffU;
  if (a >= 0x7f800000U) return static_cast<uint16_t>(sign | (a > 0x7f800000U ? 0x7e00U : 0x7c00U));
  if (a >= 0x477ff000U) return static_cast<uint16_t>(sign | 0x7c00U);  // >= 65520 rounds to infinity
  if (a < 0x38800000U) {
    // Below 2^-14: a subnormal half, in units of 2^-24. The scaling is exact; nearbyint rounds
    // to nearest even in the default mode. 1024 units carry into the smallest normal, 0x0400.
    const float units = std::fabs(f) * 16777216.0F;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(units)));
  }
  uint32_t h = (((a >> 23) - 112U) << 10) | ((a >> 13) & 0x3ffU);
  const uint32_t rest = a & 0x1fffU;
  if (rest > 0x1000U || (rest == 0x1000U && (h & 1U) != 0)) ++h;  // a carry moves into the exponent
  return static_cast<uint16_t>(sign | h);
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000U) << 16;
  const uint32_t e = (h >> 10) & 0x1fU;
  const uint32_t m = h & 0x3ffU;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign != 0 ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000U | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112U) << 23) | (m << 13));
}

std::vector<char> encode(const double* values, int64_t n, std::string_view dtype) {
  const size_t es = dtype_bytes(dtype);
  if (!is_float(dtype)) throw Error("safetensors: cannot write dtype '" + std::string(dtype) + "'");
  std::vector<char> out(static_cast<size_t>(n) * es);
  for (int64_t i = 0; i < n; ++i) {
    char* p = out.data() + static_cast<size_t>(i) * es;
    const double v = values[i];
    if (dtype == "F64") {
      std::memcpy(p, &v, 8);
    } else if (dtype == "F32") {
      const auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
    } else {
      // Through float: exact for values that came from a float model; for doubles the double
      // rounding can differ from direct rounding only at exact float midpoints.
      const uint16_t h = dtype == "F16" ? float_to_f16(static_cast<float>(v)) : float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
    }
  }
  return out;
}

std::vector<char> serialize(const std::vector<OutTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const OutTensor& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw Error("safetensors: duplicate or reserved tensor name '" + t.name + "'");
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (!is_float(t.dtype) || n * dtype_bytes(t.dtype) != t.data.size())
      throw Error("safetensors: tensor '" + t.name + "' has " + std::to_string(t.data.size()) + " bytes, not shape x " +
                  t.dtype);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  // Sized once and filled with memcpy (GCC 12 warns falsely about insert() into a small vector).
  std::vector<char> out(8 + text.size() + offset);
  const uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t at = 8 + text.size();
  for (const OutTensor& t : tensors) {
    if (!t.data.empty()) std::memcpy(out.data() + at, t.data.data(), t.data.size());
    at += t.data.size();
  }
  return out;
}

void write(const std::string& path, const std::vector<OutTensor>& tensors,
           const std::map<std::string, std::string>& metadata) {
  const std::vector<char> bytes = serialize(tensors, metadata);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot write");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error(path + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(path + ": cannot rename the written file into place: " + ec.message());
}

}  // namespace bench::safetensors
