#include "trace/tree_util.h"

namespace rune::detail {

void check_same_structure(const char* api, size_t k, const FlatWithPaths& first,
                          const FlatWithPaths& other) {
  const auto& a = first.flat.tokens;
  const auto& b = other.flat.tokens;
  if (a == b) return;
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  // The path of the first token that differs (its place in whichever tree still has one).
  const auto& paths = i < first.token_paths.size() ? first.token_paths : other.token_paths;
  std::string where = i < paths.size() ? paths[i] : std::string();
  throw std::invalid_argument(std::string(api) + ": tree " + std::to_string(k) +
                              " has a different structure than tree 0 (" +
                              std::to_string(other.flat.leaves.size()) + " leaves against " +
                              std::to_string(first.flat.leaves.size()) + ", first difference at " +
                              (where.empty() ? "the root" : "'" + where + "'") + ")");
}

}  // namespace rune::detail
