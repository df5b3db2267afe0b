#include "experiment/toml_reader.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace bench {

namespace {

SourceLoc loc_of(const toml::source_region& r, const std::string& file) {
  return SourceLoc{file, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column), {}};
}

Value convert(const toml::node& n, SourceLoc loc, const std::string& file);

Value convert_table(const toml::table& t, SourceLoc loc, const std::string& file) {
  struct Member {
    SourceLoc loc;
    std::string key;
    const toml::node* node;
  };
  std::vector<Member> members;
  for (const auto& [k, v] : t) {
    SourceLoc kl = loc_of(k.source(), file);
    if (kl.line == 0) kl = loc_of(v.source(), file);
    members.push_back({kl, std::string(k.str()), &v});
  }
  // TOML++ keeps keys sorted by name; the file's order reads better in labels and messages.
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.column < b.loc.column;
  });
  Value::Table out;
  for (auto& m : members) out.emplace_back(m.key, convert(*m.node, m.loc, file));
  return Value::table(std::move(out), std::move(loc));
}

Value convert(const toml::node& n, SourceLoc loc, const std::string& file) {
  switch (n.type()) {
    case toml::node_type::table:
      return convert_table(*n.as_table(), std::move(loc), file);
    case toml::node_type::array: {
      Value::Array out;
      for (const auto& e : *n.as_array()) out.push_back(convert(e, loc_of(e.source(), file), file));
      return Value::array(std::move(out), std::move(loc));
    }
    case toml::node_type::string:
      return Value::string(n.as_string()->get(), std::move(loc));
    case toml::node_type::integer:
      return Value::integer(n.as_integer()->get(), std::move(loc));
    case toml::node_type::floating_point:
      return Value::number(n.as_floating_point()->get(), std::move(loc));
    case toml::node_type::boolean:
      return Value::boolean(n.as_boolean()->get(), std::move(loc));
    default:
      throw ConfigError(loc, "dates and times are not valid values in an experiment file");
  }
}

}  // namespace

Value read_toml(const std::string& text, const std::string& file) {
  try {
    toml::table t = toml::parse(text, file);
    return convert_table(t, SourceLoc{file, 1, 1, {}}, file);
  } catch (const toml::parse_error& e) {
    std::string msg(e.description());
    if (!msg.empty() && msg.back() == '.') msg.pop_back();
    throw ConfigError(loc_of(e.source(), file), "TOML syntax error: " + msg);
  }
}

std::string read_text_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(SourceLoc{file, 0, 0, {}}, "cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigError(SourceLoc{file, 0, 0, {}}, "cannot read the file");
  return ss.str();
}

}  // namespace bench
