#include "runners/evaluate.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "bench/interfaces.h"
#include "bench/ops.h"
#include "plugins/registry.h"

namespace bench {

namespace {

/// Append the first `cols` columns of rows [row, row + n) of `t` ([rows, width]) to `out` as
/// doubles (cols < width: the logits' padding columns are left out).
void append_rows(const Tensor& t, int64_t row, int64_t n, int64_t cols, std::vector<double>& out) {
  const int64_t width = t.shape()[t.shape().rank() - 1];
  std::vector<char> storage;
  const Tensor host =
      ops::on_host(Tensor(static_cast<char*>(t.raw()) + row * width * static_cast<int64_t>(dtype_size(t.dtype())),
                          t.dtype(), {n * width}),
                   storage);
  dispatch_float(t.dtype(), [&]<class T>() {
    const T* p = host.data<T>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < cols; ++j) out.push_back(scalar_value(p[i * width + j]));
  });
}

}  // namespace

EvalResult evaluate_tokens(Model& model, const std::vector<int32_t>& tokens, bool keep_logits, bool keep_hidden,
                           RunContext& ctx) {
  const ModelDims& d = model.spec().dims;
  const int64_t seq = d.seq_len;
  const int64_t batch = d.batch_size;
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < 2) throw Error("evaluation needs at least two tokens, got " + std::to_string(n));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= d.vocab_size)
      throw Error("token " + std::to_string(tokens[static_cast<size_t>(i)]) + " at " + std::to_string(i) +
                  " is outside the model's vocab_size " + std::to_string(d.vocab_size));
  EvalResult r;
  r.positions = n - 1;
  r.windows = (r.positions + seq - 1) / seq;
  // Per layer, so that the dump is [n_layers, positions, d_model] however windows are batched.
  std::vector<std::vector<double>> hidden(keep_hidden ? static_cast<size_t>(d.n_layers) : 0);
  std::vector<int32_t> inputs(static_cast<size_t>(batch * seq)), targets(inputs.size());
  double total = 0;
  ctx.training = false;
  for (int64_t w0 = 0; w0 < r.windows; w0 += batch) {
    int64_t valid = 0;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t pos = (w0 + b) * seq + t;  // predicted position: input pos, target pos + 1
        const auto i = static_cast<size_t>(b * seq + t);
        const bool in = pos < r.positions;
        inputs[i] = in ? tokens[static_cast<size_t>(pos)] : 0;
        targets[i] = in ? tokens[static_cast<size_t>(pos + 1)] : -1;
        valid += in ? 1 : 0;
      }
    }
    const LossInfo info = model.forward(inputs.data(), targets.data(), ctx);
    total += info.loss * static_cast<double>(valid);
    for (int64_t b = 0; b < batch && (w0 + b) * seq < r.positions; ++b) {
      const int64_t rows = std::min(seq, r.positions - (w0 + b) * seq);
      if (keep_logits) {
        const Tensor* logits = model.logits();
        if (logits == nullptr) throw Error("the configured head does not expose its logits");
        if (logits->shape()[logits->shape().rank() - 1] < d.vocab_size)
          throw Error("the head's logits are narrower than the vocabulary");
        append_rows(*logits, b * seq, rows, d.vocab_size, r.logits);  // the real vocabulary: no padding
      }
      for (size_t l = 0; l < hidden.size(); ++l)
        append_rows(model.block_output(static_cast<int64_t>(l)), b * seq, rows, d.d_model, hidden[l]);
    }
  }
  r.loss = total / static_cast<double>(r.positions);
  for (const auto& h : hidden) r.hidden.insert(r.hidden.end(), h.begin(), h.end());
  return r;
}

std::vector<int32_t> read_eval_tokens(const Registry& registry, const std::string& path, std::string format,
                                      int64_t vocab_size) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error("no such file: " + path);
  if (format == "auto") {
    int32_t magic = 0;
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(&magic), sizeof magic);
    if (in && magic == 20240520) {
      format = "llmc";
    } else {
      format = std::filesystem::path(path).extension() == ".txt" ? "text" : "uint16";
    }
  }
  const bool text = format == "text";
  if (!text && format != "llmc" && format != "uint16" && format != "uint32")
    throw Error("unknown token format '" + format + "': auto, llmc, uint16, uint32 or text");
  const ComponentInfo* info = registry.find(Slot::kDataset, text ? "text" : "tokens");
  if (info == nullptr) throw Error(std::string("no dataset component '") + (text ? "text" : "tokens") + "' is loaded");
  Value::Table given{{"path", Value::string(std::filesystem::absolute(path).string())}};
  if (!text) {
    given.emplace_back("format", Value::string(format));
    given.emplace_back("vocab_size", Value::integer(vocab_size));
  }
  const Params params = Params::resolve(info->params, Value::table(given), "dataset '" + info->name + "'", {});
  const std::unique_ptr<Component> c = registry.create(*info, params);
  const auto* ds = dynamic_cast<const Dataset*>(c.get());
  if (ds == nullptr) throw Error("dataset '" + info->name + "' does not implement bench::Dataset");
  std::vector<int32_t> tokens = ds->all_tokens();
  if (tokens.empty()) throw Error(path + ": no tokens");
  return tokens;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<double>& values,
               bool float64) {
  std::string dims;  // "2, 3"; a 1-tuple keeps its comma: "5,"
  for (size_t i = 0; i < shape.size(); ++i) dims += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header =
      std::string("{'descr': '") + (float64 ? "<f8" : "<f4") + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64 and
  // ending in a newline, as NumPy writes it.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot write");
  const char magic[] = "\x93NUMPY\x01\x00";
  out.write(magic, 8);
  const auto len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (double v : values) {
    if (float64) {
      out.write(reinterpret_cast<const char*>(&v), 8);
    } else {
      const auto f = static_cast<float>(v);
      out.write(reinterpret_cast<const char*>(&f), 4);
    }
  }
  if (!out) throw Error(path + ": write failed");
}

}  // namespace bench
