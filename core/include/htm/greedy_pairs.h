// Greedy disjoint pairs: the noiseless counterpart of htm::sample_disjoint_pairs, for policies
// that merge the best-scoring pairs deterministically (the `nearest` and `tome` baselines).
// Header-only: a plugin compiles it into itself, so it adds nothing to the host's ABI.
#pragma once

#include <algorithm>
#include <atomic>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "htm/sets.h"

namespace htm {

// r disjoint pairs of the T tokens per sample, greedily by descending score: scores is B×R×C, its
// row a scoring token row_token[a] merged into each token col_token[c]. Each step takes the best
// entry whose two tokens are unused and differ, ties to the lower a·C + c; −∞ is never taken. The same choice as
// sorting all entries, but each unused row keeps only its best column in a heap, rescanned when
// that column's token is taken: O(R·C) per sample plus O(C) per rescan.
inline std::pair<torch::Tensor, torch::Tensor> greedy_pairs(const torch::Tensor& scores, int64_t r,
                                                            const std::vector<int64_t>& row_token,
                                                            const std::vector<int64_t>& col_token, int64_t T) {
  const int64_t B = scores.size(0), R = scores.size(1), C = scores.size(2);
  // A sequential scan: it runs on the host, and its pairs go back to the scores' device.
  auto values = scores.detach().to(torch::kCPU, torch::kFloat).contiguous();  // host: a sequential scan
  auto src = torch::empty({B, r}, torch::kLong), dst = torch::empty({B, r}, torch::kLong);
  const float* all = values.data_ptr<float>();
  int64_t* src_all = src.data_ptr<int64_t>();
  int64_t* dst_all = dst.data_ptr<int64_t>();
  std::atomic<bool> short_of_pairs{false};
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    struct Candidate {
      float score;
      int64_t a, c;
    };
    auto after = [C](const Candidate& x, const Candidate& y) {  // the heap's top comes first
      return x.score < y.score || (x.score == y.score && x.a * C + x.c > y.a * C + y.c);
    };
    std::vector<char> used(T);
    for (int64_t b = begin; b < end; ++b) {
      const float* s = all + b * R * C;
      std::fill(used.begin(), used.end(), 0);
      auto best_column = [&](int64_t a) {  // c = −1: none left with a finite score
        Candidate best{-std::numeric_limits<float>::infinity(), a, -1};
        for (int64_t c = 0; c < C; ++c)
          if (col_token[c] != row_token[a] && !used[col_token[c]] && s[a * C + c] > best.score)
            best = {s[a * C + c], a, c};
        return best;
      };
      std::priority_queue<Candidate, std::vector<Candidate>, decltype(after)> heap(after);
      for (int64_t a = 0; a < R; ++a)
        if (Candidate best = best_column(a); best.c >= 0) heap.push(best);
      int64_t taken = 0;
      while (taken < r && !heap.empty()) {
        const Candidate top = heap.top();
        heap.pop();
        const int64_t i = row_token[top.a], j = col_token[top.c];
        if (used[i]) continue;
        if (used[j]) {  // its best partner went to another pair: the next best, if any
          if (Candidate next = best_column(top.a); next.c >= 0) heap.push(next);
          continue;
        }
        used[i] = used[j] = 1;
        src_all[b * r + taken] = i;
        dst_all[b * r + taken] = j;
        ++taken;
      }
      if (taken < r) short_of_pairs = true;
    }
  });
  if (short_of_pairs) throw htm::NonFinite("fewer than r pairs of tokens have a finite score (NaN tokens?)");
  return {src.to(scores.device()), dst.to(scores.device())};
}

/// The same over all T×T ordered pairs of `scores` (B×T×T; the diagonal is never taken).
inline std::pair<torch::Tensor, torch::Tensor> greedy_pairs(const torch::Tensor& scores, int64_t r) {
  std::vector<int64_t> tokens(static_cast<size_t>(scores.size(1)));
  for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = static_cast<int64_t>(k);
  return greedy_pairs(scores, r, tokens, tokens, scores.size(1));
}

}  // namespace htm
