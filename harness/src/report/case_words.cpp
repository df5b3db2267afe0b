#include "report/case_words.h"

namespace bench::report {

std::vector<std::string> label_tokens(const CaseRow& c) {
  std::vector<std::string> tokens;
  std::string rest = c.label;
  if (!c.variant.empty() && rest.rfind(c.variant, 0) == 0) {
    tokens.push_back(c.variant);
    rest = rest.substr(c.variant.size());
  } else if (c.variant.empty() && rest == "base") {
    return tokens;
  }
  size_t pos = 0;
  while (pos < rest.size()) {
    const size_t space = rest.find(' ', pos);
    const std::string word = rest.substr(pos, space == std::string::npos ? std::string::npos : space - pos);
    if (!word.empty()) tokens.push_back(word);
    if (space == std::string::npos) break;
    pos = space + 1;
  }
  return tokens;
}

}  // namespace bench::report
