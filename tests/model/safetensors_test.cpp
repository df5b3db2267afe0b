// The safetensors reader and writer: bytes written by hand against the format's specification,
// float16/bfloat16 bit patterns from their definitions, and every kind of malformed file.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "bench/error.h"
#include "support/errors.h"

namespace bench::safetensors {
namespace safetensors_test {
namespace {

/// Append n raw bytes (resize + memcpy: GCC 12 warns falsely about insert() into small vectors).
void append(std::vector<char>& out, const void* p, size_t n) {
  const size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, p, n);
}

/// A file from a header text and a buffer, with the header length as given (or the true one).
std::vector<char> make_file(const std::string& header, size_t buffer_bytes, int64_t header_len = -1) {
  std::vector<char> out;
  const uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
  append(out, &n, 8);
  append(out, header.data(), header.size());
  for (size_t i = 0; i < buffer_bytes; ++i) out.push_back(static_cast<char>(i));
  return out;
}

/// The error parsing `bytes` gives, or "".
std::string parse_error(const std::vector<char>& bytes) {
  return test::error_of([&] { parse(bytes, "t.safetensors"); });
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // Two tensors, listed out of offset order, and metadata; the buffer holds 1.0f, 2.0f, -0.5f
  // (F32) and then bf16 1.0 (0x3f80), f16 -2.0 (0xc000) as one F16 pair.
  const std::string header =
      R"({"b":{"dtype":"F16","shape":[2],"data_offsets":[12,16]},)"
      R"("a":{"dtype":"F32","shape":[3,1],"data_offsets":[0,12]},"__metadata__":{"format":"pt"}})";
  std::vector<char> bytes = make_file(header, 0);
  const float a[] = {1.0F, 2.0F, -0.5F};
  const uint16_t b[] = {0x3c00, 0xc000};  // f16 1.0, -2.0
  append(bytes, a, 12);
  append(bytes, b, 4);
  const File f = parse(bytes, "t");
  ASSERT_EQ(f.tensors.size(), 2U);
  EXPECT_EQ(f.tensors[0].name, "a");  // offset order
  EXPECT_EQ(f.tensors[0].shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.values(*f.find("a")), (std::vector<double>{1.0, 2.0, -0.5}));
  EXPECT_EQ(f.values(*f.find("b")), (std::vector<double>{1.0, -2.0}));
}

TEST(Safetensors, WriterFollowsTheSpecification) {
  const double v[] = {1.5, -3.0};
  const std::vector<char> bytes = serialize({{"w", "F32", {2}, encode(v, 2, "F32")}}, {{"k", "v"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0U);  // header padded so the buffer starts 8-aligned
  const std::string header(bytes.data() + 8, n);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})");
  float back[2];
  std::memcpy(back, bytes.data() + 8 + n, 8);
  EXPECT_EQ(back[0], 1.5F);
  EXPECT_EQ(back[1], -3.0F);
  EXPECT_EQ(bytes.size(), 8 + n + 8);
  EXPECT_EQ(parse(bytes, "t").values(*parse(bytes, "t").find("w")), (std::vector<double>{1.5, -3.0}));
}

TEST(Safetensors, HalfAndBfloat16BitPatterns) {
  // IEEE binary16: 1 = 0x3c00, 65504 (max) = 0x7bff, 2^-24 (smallest subnormal) = 0x0001,
  // 2^-14 (smallest normal) = 0x0400, 0.1 -> 0x2e66 (nearest), 65520 and above -> inf.
  EXPECT_EQ(float_to_f16(1.0F), 0x3c00);
  EXPECT_EQ(float_to_f16(-2.0F), 0xc000);
  EXPECT_EQ(float_to_f16(65504.0F), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0F), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0F), 0x7c00);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0F, -24)), 0x0001);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0F, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(float_to_f16(std::ldexp(3.0F, -25)), 0x0002);  // 1.5 units: tie to even 2
  EXPECT_EQ(float_to_f16(std::ldexp(1.0F, -14)), 0x0400);
  EXPECT_EQ(float_to_f16(0.1F), 0x2e66);
  EXPECT_EQ(float_to_f16(1.0F + std::ldexp(1.0F, -11)), 0x3c00);  // halfway: ties to even
  EXPECT_EQ(float_to_f16(1.0F + std::ldexp(3.0F, -11)), 0x3c02);  // halfway above odd: up
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_f16(std::nanf("")) & 0x7c00, 0x7c00);
  EXPECT_EQ(f16_to_float(0x3c00), 1.0F);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0F);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0F, -24));
  EXPECT_EQ(f16_to_float(0x8400), -std::ldexp(1.0F, -14));
  EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
  // bfloat16: the top 16 bits of float32, rounded to nearest even.
  EXPECT_EQ(float_to_bf16(1.0F), 0x3f80);
  EXPECT_EQ(float_to_bf16(3.14159265F), 0x4049);
  EXPECT_EQ(float_to_bf16(1.0F + std::ldexp(1.0F, -8)), 0x3f80);  // halfway: ties to even
  EXPECT_EQ(float_to_bf16(1.0F + std::ldexp(3.0F, -8)), 0x3f82);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0F);
  // Every f16 value survives float -> f16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto u = static_cast<uint16_t>(h);
    if ((u & 0x7c00) == 0x7c00 && (u & 0x3ff) != 0) continue;  // NaNs
    ASSERT_EQ(float_to_f16(f16_to_float(u)), u) << h;
  }
}

TEST(Safetensors, RejectsMalformedFiles) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(parse_error(make_file(ok, 8)), "");
  EXPECT_NE(parse_error({1, 2, 3}).find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(parse_error(make_file(ok, 8, 1000)).find("runs past the end of the file"), std::string::npos);
  EXPECT_NE(parse_error(make_file(ok, 8, int64_t{1} << 40)).find("exceeds the 100 MB limit"), std::string::npos);
  EXPECT_NE(parse_error(make_file("[" + ok + "]", 8)).find("does not start with '{'"), std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":)", 8)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", 8))
                .find("unknown dtype 'F17'"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
                .find("span 8 bytes but shape and dtype need 12"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8))
                .find("non-negative integers"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)).find("end before"),
            std::string::npos);
  EXPECT_NE(
      parse_error(make_file(R"({"a":{"dtype":"F32","shape":[2]}})", 8)).find("needs dtype, shape and data_offsets"),
      std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8))
                .find("unknown key 'x'"),
            std::string::npos);
  // Out of range, overlapping, a hole, trailing bytes.
  EXPECT_NE(parse_error(make_file(ok, 4)).find("past the end of the buffer"), std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                  8))
                .find("overlaps"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)).find("hole"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(ok, 12)).find("4 bytes after the last tensor"), std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                  8))
                .find("'a' appears twice"),
            std::string::npos);
  EXPECT_NE(parse_error(make_file(R"({"__metadata__":{"k":1}})", 0)).find("is not a string"), std::string::npos);
  // An empty file of tensors is valid: "{}" and no buffer.
  EXPECT_EQ(parse_error(make_file("{}", 0)), "");
  // Errors name the file.
  EXPECT_NE(parse_error(make_file(ok, 4)).find("t.safetensors: not a valid safetensors file"), std::string::npos);
}

TEST(Safetensors, NonFloatTensorsParseButDoNotConvert) {
  const File f = parse(make_file(R"({"i":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8), "t");
  EXPECT_EQ(f.tensors.at(0).dtype, "I64");
  EXPECT_THROW((void)f.values(f.tensors.at(0)), Error);
}

}  // namespace
}  // namespace safetensors_test
}  // namespace bench::safetensors
