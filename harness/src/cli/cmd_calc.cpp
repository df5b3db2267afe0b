// `bench calc`: parameters, FLOPs per token, KV-cache bytes and shape ratios, for an experiment's
// models (counted from their components) or for the built-in real models (docs/calc.md).
#include <fmt/format.h>

#include <cstdio>

#include "accounting/accounting.h"
#include "bench/error.h"
#include "cli/commands.h"
#include "cli/prepare.h"
#include "experiment/match.h"
#include "report/report.h"
#include "report/sheet.h"

namespace bench::cli {

namespace {

using accounting::Accounts;
using report::Sheet;
using report::SheetCell;

/// 6738415616 -> "6.738 B"; 53248 -> "53.25 K".
std::string si(double v, const char* unit = "") {
  const char* prefixes[] = {"", " K", " M", " G", " T", " P"};  // with a unit: " G" + "FLOP"
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 5) v /= 1000, ++i;
  const char* p = prefixes[i];
  if (std::string_view(unit).empty() && i == 3) p = " B";  // counts: billions
  return fmt::format("{:.4g}{}{}", v, p, unit);
}

std::string bytes_text(double b) {
  if (b >= 1e9) return fmt::format("{:.3g} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.3g} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.3g} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

struct Col {
  const char* key;
  const char* header;
};

/// A sheet builder: each added cell keeps the raw value (CSV, JSON) and the display text.
struct Rows {
  Sheet sheet;
  void columns(std::initializer_list<Col> cols) {
    for (const Col& c : cols) sheet.columns.push_back({c.key, c.header, true});
  }
  std::vector<SheetCell>& row() { return sheet.rows.emplace_back(); }
};

SheetCell text_cell(const std::string& s) { return {Value::string(s), s}; }
SheetCell int_cell(int64_t v, const std::string& t) { return {Value::integer(v), t}; }
SheetCell num_cell(double v, const std::string& t) { return {Value::number(v), t}; }
SheetCell ratio_cell(double v) { return v > 0 ? num_cell(v, fmt::format("{:.2f}", v)) : SheetCell{Value(), "-"}; }

void add_shape_columns(Rows& r) {
  r.columns({{"flops_train_per_token_6n", "train FLOP/token"},
             {"attention_share_percent", "attn %"},
             {"kv_bytes_per_token", "KV/token"},
             {"kv_bytes_per_token_mha", "KV/token if MHA"},
             {"kv_bytes_total", "KV cache"},
             {"context", "context"},
             {"batch", "batch"},
             {"d_ff_over_d_model", "d_ff/d"},
             {"d_model_over_n_layers", "d/layers"},
             {"heads_x_d_head_over_d_model", "heads*d_head/d"},
             {"heads_per_kv_head", "q/kv heads"}});
}

void add_shape_cells(std::vector<SheetCell>& row, const Accounts& a) {
  row.push_back(num_cell(a.flops_train_per_token, si(a.flops_train_per_token, "FLOP")));
  const double share =
      a.flops_train_per_token > 0 ? 100 * a.flops_attention_train_per_token / a.flops_train_per_token : 0;
  row.push_back(num_cell(share, fmt::format("{:.1f}", share)));
  row.push_back(num_cell(a.kv_bytes_per_token, bytes_text(a.kv_bytes_per_token)));
  row.push_back(num_cell(a.kv_bytes_per_token_mha, bytes_text(a.kv_bytes_per_token_mha)));
  row.push_back(num_cell(a.kv_bytes_total, bytes_text(a.kv_bytes_total)));
  row.push_back(int_cell(a.context, std::to_string(a.context)));
  row.push_back(int_cell(a.batch, std::to_string(a.batch)));
  row.push_back(ratio_cell(a.ffn_ratio));
  row.push_back(ratio_cell(a.aspect_ratio));
  row.push_back(ratio_cell(a.head_ratio));
  row.push_back(ratio_cell(a.query_per_kv_head));
}

/// The three parameter counts' cells (columns params, params_embedding, params_non_embedding).
void add_param_cells(std::vector<SheetCell>& row, const Accounts& a) {
  row.push_back(int_cell(a.params, si(static_cast<double>(a.params))));
  row.push_back(int_cell(a.params_embedding, si(static_cast<double>(a.params_embedding))));
  row.push_back(int_cell(a.params_non_embedding, si(static_cast<double>(a.params_non_embedding))));
}

/// The dimensions' columns, after add_shape_columns.
void add_dimension_columns(Rows& r) {
  r.columns({{"n_layers", "layers"},
             {"d_model", "d_model"},
             {"n_heads", "heads"},
             {"n_kv_heads", "kv heads"},
             {"d_head", "d_head"},
             {"d_ff", "d_ff"},
             {"vocab_size", "vocab"}});
}

/// The cells of add_dimension_columns; d_ff "-" where it is unknown (0: an experiment's FFN that
/// declares none).
void add_dimension_cells(std::vector<SheetCell>& row, const accounting::Architecture& s) {
  for (int64_t v : {s.n_layers, s.d_model, s.n_heads, s.n_kv_heads, s.d_head})
    row.push_back(int_cell(v, std::to_string(v)));
  row.push_back(s.d_ff > 0 ? int_cell(s.d_ff, std::to_string(s.d_ff)) : SheetCell{Value(), "-"});
  row.push_back(int_cell(s.vocab_size, std::to_string(s.vocab_size)));
}

std::string conventions(const CalcArgs& o, double bytes, bool config) {
  return fmt::format(
      "FLOPs per token: forward 2N + 2*L*T*d_attn, training 6N + 6*L*T*d_attn (N: parameters in matrix products, "
      "i.e. non-embedding plus the output projection; T: context; d_attn = n_heads*d_head; causal average); KV "
      "cache: 2*layers*kv_heads*d_head*{:g} bytes ({}) per token, at context T x batch; {}; kB/MB/GB = 10^3/10^6/10^9 "
      "bytes, K/M/G/B = 10^3/10^6/10^9\n",
      bytes, o.dtype,
      config ? "declared FLOPs: what the components report (Component::cost) at the case's seq_len and batch"
             : "context: the model's own unless --context");
}

/// The columns of `s` named by `keys`, in that order.
Sheet project(const Sheet& s, const std::vector<std::string_view>& keys) {
  Sheet out;
  std::vector<size_t> index;
  for (std::string_view k : keys)
    for (size_t c = 0; c < s.columns.size(); ++c)
      if (s.columns[c].key == k) index.push_back(c), out.columns.push_back(s.columns[c]);
  for (const auto& row : s.rows) {
    auto& r = out.rows.emplace_back();
    for (size_t c : index) r.push_back(row[c]);
  }
  return out;
}

/// A titled subset of the columns, for the text table and Markdown (CSV and JSON carry them all).
struct View {
  const char* title;
  std::vector<std::string_view> keys;
};

std::string render(const Rows& r, report::Format f, const std::string& preamble, const std::vector<View>& views,
                   const std::string& notes) {
  std::string out;
  switch (f) {
    case report::Format::kTable:
      out = preamble;
      for (const View& v : views) out += fmt::format("\n{}\n", v.title) + report::sheet_text(project(r.sheet, v.keys));
      return out + notes;
    case report::Format::kMarkdown:
      for (const View& v : views)
        out += fmt::format("{}### {}\n\n", out.empty() ? "" : "\n", v.title) +
               report::sheet_markdown(project(r.sheet, v.keys));
      return out + notes;
    case report::Format::kCsv:
      return report::sheet_csv(r.sheet);
    case report::Format::kJson:
      return report::dump_json(report::sheet_json(r.sheet));
  }
  return out;
}

const std::vector<std::string_view> shape_keys = {"n_layers",
                                                  "d_model",
                                                  "n_heads",
                                                  "n_kv_heads",
                                                  "d_head",
                                                  "d_ff",
                                                  "vocab_size",
                                                  "d_ff_over_d_model",
                                                  "d_model_over_n_layers",
                                                  "heads_x_d_head_over_d_model",
                                                  "heads_per_kv_head"};
const std::vector<std::string_view> cost_keys = {"flops_train_per_token_6n",
                                                 "attention_share_percent",
                                                 "kv_bytes_per_token",
                                                 "kv_bytes_per_token_mha",
                                                 "kv_bytes_total",
                                                 "context",
                                                 "batch"};

std::vector<std::string_view> concat(std::vector<std::string_view> a, const std::vector<std::string_view>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int calc_models(const CalcArgs& o, double bytes, report::Format f) {
  std::vector<const accounting::Architecture*> models;
  if (o.all) {
    for (const auto& a : accounting::real_models()) models.push_back(&a);
  } else {
    const auto* a = accounting::find_model(o.model);
    if (a == nullptr) {
      std::string names;
      for (const auto& m : accounting::real_models()) names += (names.empty() ? "" : ", ") + m.name;
      throw Error(fmt::format("unknown model \"{}\"; known: {}", o.model, names));
    }
    models.push_back(a);
  }
  Rows r;
  r.columns({{"model", "model"},
             {"ffn", "ffn"},
             {"params", "params"},
             {"params_embedding", "embedding"},
             {"params_non_embedding", "non-embedding"},
             {"published_params", "published"},
             {"difference_percent", "diff %"},
             {"flops_forward_per_token", "fwd FLOP/token"}});
  r.sheet.columns[0].right_aligned = r.sheet.columns[1].right_aligned = false;
  add_shape_columns(r);
  add_dimension_columns(r);
  r.sheet.columns.push_back({"note", "note", false});
  r.sheet.columns.push_back({"published_source", "published source", false});
  std::string notes;
  for (const auto* a : models) {
    const Accounts acc = accounting::account(*a, o.context, o.batch, bytes);
    auto& row = r.row();
    row.push_back(text_cell(a->name));
    row.push_back(text_cell(a->ffn));
    add_param_cells(row, acc);
    row.push_back(int_cell(a->published_params, si(static_cast<double>(a->published_params))));
    const double diff =
        100.0 * static_cast<double>(acc.params - a->published_params) / static_cast<double>(a->published_params);
    row.push_back(num_cell(diff, fmt::format("{:+.3f}", diff)));
    row.push_back(num_cell(acc.flops_forward_per_token, si(acc.flops_forward_per_token, "FLOP")));
    add_shape_cells(row, acc);
    add_dimension_cells(row, *a);
    row.push_back(text_cell(a->note));
    row.push_back(text_cell(a->published_source));
    notes +=
        fmt::format("{}: {} parameters, published {} ({}); {}\n", a->name, thousands(static_cast<double>(acc.params)),
                    thousands(static_cast<double>(a->published_params)), a->published_source, a->note);
  }
  // The text table lists the long notes below the tables.
  const std::vector<View> views = {
      {"shape", concat({"model", "ffn"}, shape_keys)},
      {"parameters, FLOPs and KV cache", concat({"model", "params", "params_embedding", "params_non_embedding",
                                                 "published_params", "difference_percent", "flops_forward_per_token"},
                                                cost_keys)}};
  std::fputs(render(r, f, conventions(o, bytes, false), views, "\n" + notes).c_str(), stdout);
  return kOk;
}

int calc_file(const CalcArgs& o, double bytes, report::Format f) {
  // As `bench run` resolves it in this build: auto is the CPU here, and the guarded and emulated
  // devices run on the CPU, with its [cpu] overrides.
  const std::string device = o.device == "cuda" ? "cuda" : "cpu";
  const auto models = accounting::config_accounts(o.file, device, o.context, o.batch, bytes);
  Rows r;
  r.columns({{"cases", "cases"},
             {"model", "model"},
             {"params", "params"},
             {"params_embedding", "embedding"},
             {"params_non_embedding", "non-embedding"},
             {"flops_declared_forward_per_token", "declared fwd FLOP/token"},
             {"flops_declared_train_per_token", "declared train FLOP/token"}});
  r.sheet.columns[0].right_aligned = r.sheet.columns[1].right_aligned = false;
  add_shape_columns(r);
  add_dimension_columns(r);
  r.columns({{"seq_len", "seq_len"}});
  for (const auto& m : models) {
    auto& row = r.row();
    std::string ordinals;
    for (int64_t i : m.ordinals) ordinals += (ordinals.empty() ? "" : ",") + std::to_string(i);
    row.push_back(text_cell(ordinals));
    row.push_back(text_cell(m.label));
    const Accounts& a = m.accounts;
    add_param_cells(row, a);
    row.push_back(num_cell(m.flops_declared_forward_per_token, si(m.flops_declared_forward_per_token, "FLOP")));
    row.push_back(num_cell(m.flops_declared_train_per_token, si(m.flops_declared_train_per_token, "FLOP")));
    add_shape_cells(row, a);
    add_dimension_cells(row, m.shape);
    row.push_back(int_cell(m.seq_len, std::to_string(m.seq_len)));
  }
  const std::string preamble = fmt::format("{}: {} distinct models on {} ({} overrides)\n{}", o.file, models.size(),
                                           device, device == "cpu" ? "[cpu]" : "[cuda]", conventions(o, bytes, true));
  const std::vector<View> views = {
      {"shape", concat({"cases", "model"}, concat(shape_keys, {"seq_len"}))},
      {"parameters, FLOPs and KV cache", concat({"cases", "model", "params", "params_embedding", "params_non_embedding",
                                                 "flops_declared_forward_per_token", "flops_declared_train_per_token"},
                                                cost_keys)}};
  std::fputs(render(r, f, preamble, views, "").c_str(), stdout);
  return kOk;
}

}  // namespace

int cmd_calc(const GlobalOptions& /*g*/, const CalcArgs& o) {
  try {
    const int given = (o.file.empty() ? 0 : 1) + (o.model.empty() ? 0 : 1) + (o.all ? 1 : 0);
    if (given != 1) throw Error("calc: give an experiment FILE, --model NAME or --all");
    const double bytes = *accounting::dtype_bytes(o.dtype);
    const auto f = *report::parse_format(o.format);
    return o.file.empty() ? calc_models(o, bytes, f) : calc_file(o, bytes, f);
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
