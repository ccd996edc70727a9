#include "ir/rewrite.h"

#include <unordered_map>

namespace ir {

std::vector<NodeRef> rewrite(const std::vector<NodeRef>& roots, const RewriteRule& rule) {
  std::unordered_map<NodeRef, NodeRef> done;
  for (NodeRef n : toposort(roots)) {
    std::vector<NodeRef> src;
    src.reserve(n->src.size());
    bool same = true;
    for (auto s : n->src) {
      src.push_back(done.at(s));
      same &= src.back() == s;
    }
    NodeRef r = rule(n, src);
    if (!r) r = same ? n : make(n->op, n->dtype, n->shape, src, n->arg);
    done[n] = r;
  }
  std::vector<NodeRef> out;
  for (auto r : roots) out.push_back(done.at(r));
  return out;
}

}  // namespace ir
