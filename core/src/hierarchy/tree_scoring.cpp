#include "hierarchy/tree_scoring.h"

#include <algorithm>

#include <torch/torch.h>

#include "htm/error.h"

namespace htm {

std::vector<MergeTree> merge_trees(const std::vector<MergeDecision>& decisions, int64_t tokens, int64_t batch) {
  int64_t B = batch;
  for (const auto& d : decisions)
    if (d.src.defined()) B = d.src.size(0);
  // The decisions on the host once (a run on a GPU made them there), not a copy per sample.
  std::vector<std::pair<at::Tensor, at::Tensor>> host;
  for (const auto& d : decisions)
    host.emplace_back(d.src.defined() ? d.src.to(torch::kCPU).contiguous() : at::Tensor(),   // host: scoring
                      d.dst.defined() ? d.dst.to(torch::kCPU).contiguous() : at::Tensor());  // host: scoring
  std::vector<MergeTree> trees(B);
  std::vector<int64_t> node, next;
  std::vector<char> dropped;
  for (int64_t b = 0; b < B; ++b) {
    MergeTree& tree = trees[b];
    tree.leaves = tokens;
    node.resize(tokens);  // node id of each token of the current population
    for (int64_t i = 0; i < tokens; ++i) node[i] = i;
    for (size_t layer = 0; layer < decisions.size(); ++layer) {
      const auto& [all_src, all_dst] = host[layer];
      if (!all_src.defined() || all_src.size(1) == 0) continue;
      const int64_t r = all_src.size(1);  // read through pointers: a tensor per sample costs more than the scan
      const int64_t* s = all_src.data_ptr<int64_t>() + b * r;
      const int64_t* t = all_dst.data_ptr<int64_t>() + b * r;
      dropped.assign(node.size(), 0);
      for (int64_t k = 0; k < r; ++k) {
        tree.merges.push_back({node[s[k]], node[t[k]]});
        tree.layer.push_back(static_cast<int64_t>(layer) + 1);
        node[t[k]] = tokens + static_cast<int64_t>(tree.merges.size()) - 1;
        dropped[s[k]] = 1;
      }
      next.clear();
      for (size_t i = 0; i < node.size(); ++i)
        if (!dropped[i]) next.push_back(node[i]);
      node.swap(next);
    }
  }
  return trees;
}

std::vector<MergeTree> true_trees(const at::Tensor& tree) {
  if (tree.dim() != 3 || tree.size(2) != 2) throw Error("Batch::tree must be B×(N−1)×2");
  auto t = tree.to(torch::kCPU, torch::kLong).contiguous();  // host: scoring
  auto a = t.accessor<int64_t, 3>();
  std::vector<MergeTree> trees;
  for (int64_t b = 0; b < t.size(0); ++b) {
    std::vector<std::array<int64_t, 2>> merges;
    for (int64_t k = 0; k < t.size(1); ++k) merges.push_back({a[b][k][0], a[b][k][1]});
    trees.push_back(tree_from_merges(t.size(1) + 1, merges));
  }
  return trees;
}

std::string shape_code(const MergeTree& tree) {
  std::vector<std::string> code(tree.leaves + tree.merges.size(), "()");
  std::vector<char> child(code.size(), 0);
  for (size_t k = 0; k < tree.merges.size(); ++k) {
    auto a = code[tree.merges[k][0]], b = code[tree.merges[k][1]];
    if (b < a) std::swap(a, b);
    code[tree.leaves + k] = "(" + a + b + ")";
    child[tree.merges[k][0]] = child[tree.merges[k][1]] = 1;
  }
  std::vector<std::string> roots;  // a forest: its trees' codes, sorted
  for (size_t i = 0; i < code.size(); ++i)
    if (!child[i]) roots.push_back(code[i]);
  std::sort(roots.begin(), roots.end());
  std::string out;
  for (const auto& r : roots) out += r;
  return out;
}

std::vector<std::array<double, 2>> token_positions(const at::Tensor& sample) {
  if (sample.dim() != 2 || (sample.size(1) < 2 || sample.size(1) > 4))
    throw Error(std::string("token positions need N×2 points, N×3 flagged points or N×4 segments, got ") +
                c10::str(sample.sizes()));
  auto s = sample.to(torch::kCPU, torch::kDouble).contiguous();  // host: scoring
  auto a = s.accessor<double, 2>();
  std::vector<std::array<double, 2>> positions;
  for (int64_t i = 0; i < s.size(0); ++i) {
    if (s.size(1) < 4)
      positions.push_back({a[i][0], a[i][1]});
    else
      positions.push_back({0.5 * (a[i][0] + a[i][2]), 0.5 * (a[i][1] + a[i][3])});
  }
  return positions;
}

std::vector<std::vector<double>> token_features(const at::Tensor& sample) {
  if (sample.dim() != 2) throw Error(std::string("token features need N×F tokens, got ") + c10::str(sample.sizes()));
  auto s = sample.to(torch::kCPU, torch::kDouble).contiguous();  // host: scoring
  auto a = s.accessor<double, 2>();
  std::vector<std::vector<double>> rows(s.size(0), std::vector<double>(s.size(1)));
  for (int64_t i = 0; i < s.size(0); ++i)
    for (int64_t k = 0; k < s.size(1); ++k) rows[i][k] = a[i][k];
  return rows;
}

void TreeScoreMean::add(const MergeTree& predicted, const MergeTree& truth) {
  const Scores sibling = sibling_scores(predicted, truth);
  sibling_p_ += sibling.precision;
  sibling_r_ += sibling.recall;
  sibling_f1_ += sibling.f1;
  cluster_f1_ += cluster_scores(predicted, truth).f1;
  ++n_;
}

std::vector<Metric> TreeScoreMean::metrics(const std::string& prefix) const {
  const double n = static_cast<double>(std::max<int64_t>(1, n_));
  return {{prefix + "sibling_precision", sibling_p_ / n},
          {prefix + "sibling_recall", sibling_r_ / n},
          {prefix + "sibling_f1", sibling_f1_ / n},
          {prefix + "cluster_f1", cluster_f1_ / n}};
}

}  // namespace htm
