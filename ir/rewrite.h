// The rewrite engine: rebuilds a DAG bottom-up, visiting each node once (sharing is kept), and
// offers every node, with its already rewritten sources, to a rule. The rule returns the
// replacement, or nullptr to keep the node as rebuilt from the new sources. Passes that map
// nodes to nodes (decompose, constant folding, dtype lowering) are rules over this engine.
#pragma once
#include <functional>
#include <vector>

#include "ir/node.h"

namespace ir {

using RewriteRule = std::function<NodeRef(NodeRef node, const std::vector<NodeRef>& new_src)>;

std::vector<NodeRef> rewrite(const std::vector<NodeRef>& roots, const RewriteRule& rule);
inline NodeRef rewrite(NodeRef root, const RewriteRule& rule) {
  return rewrite(std::vector<NodeRef>{root}, rule)[0];
}

}  // namespace ir
