#include "layout.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace htm::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kBox = 0.95;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double radians(double degrees) { return degrees * kPi / 180.0; }

std::array<float, 2> as_float(const Point& p) { return {static_cast<float>(p[0]), static_cast<float>(p[1])}; }

class Builder {
 public:
  Builder(int64_t n, const LayoutParams& params, Rng& rng)
      : n_(n), params_(params), rng_(rng), theta0_(rng.uniform(0, 2 * kPi)) {
    layout_.leaves.resize(n);
  }

  Layout run() {
    build(0, n_, 0, {0, 0});
    if (deepest_ >= 0) layout_.deepest_distance = std::pow(params_.shrink, deepest_);
    layout_.merges = relabel(layout_.merges, n_, identity());
    return std::move(layout_);
  }

 private:
  // Leaves lo..hi−1 centred at c; returns the node id (post-order, relabelled in run()).
  int64_t build(int64_t lo, int64_t hi, int depth, Point c) {
    if (hi - lo == 1) {
      layout_.leaves[lo] = c;
      return lo;
    }
    deepest_ = std::max(deepest_, depth);
    const double jitter = radians(params_.angle_jitter);
    const double theta = theta0_ + depth * kPi / 2 + rng_.uniform(-jitter, jitter);
    const double half = 0.5 * std::pow(params_.shrink, depth);
    const double dx = half * std::cos(theta), dy = half * std::sin(theta);
    const int64_t mid = lo + (hi - lo + 1) / 2;
    const int64_t a = build(lo, mid, depth + 1, {c[0] - dx, c[1] - dy});
    const int64_t b = build(mid, hi, depth + 1, {c[0] + dx, c[1] + dy});
    layout_.merges.push_back({a, b});
    return n_ + static_cast<int64_t>(layout_.merges.size()) - 1;
  }

  std::vector<int64_t> identity() const {
    std::vector<int64_t> id(n_);
    std::iota(id.begin(), id.end(), 0);
    return id;
  }

  int64_t n_;
  const LayoutParams& params_;
  Rng& rng_;
  double theta0_;
  int deepest_ = -1;
  Layout layout_;
};

}  // namespace

uint64_t sample_seed(int64_t seed, int split, int64_t index) {
  const uint64_t s = splitmix64(static_cast<uint64_t>(seed));
  return splitmix64(splitmix64(s ^ static_cast<uint64_t>(split)) ^ static_cast<uint64_t>(index));
}

double Rng::uniform(double lo, double hi) {
  return lo + (hi - lo) * (static_cast<double>(engine_() >> 11) * 0x1.0p-53);
}

int64_t Rng::below(int64_t n) { return static_cast<int64_t>((static_cast<unsigned __int128>(engine_()) * n) >> 64); }

std::vector<int64_t> Rng::permutation(int64_t n) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[below(i + 1)]);
  return p;
}

Layout balanced_layout(int64_t n, const LayoutParams& params, Rng& rng) { return Builder(n, params, rng).run(); }

void fit_into_box(std::vector<Point>& points, Rng& rng, bool rescale) {
  if (points.empty()) return;
  Point lo = points[0], hi = points[0];
  for (const auto& p : points)
    for (int d = 0; d < 2; ++d) lo[d] = std::min(lo[d], p[d]), hi[d] = std::max(hi[d], p[d]);
  const double extent = std::max(hi[0] - lo[0], hi[1] - lo[1]);
  const double scale = rescale && extent > 0 ? rng.uniform(0.6, 1.0) * 2 * kBox / extent : 1.0;
  Point shift;
  for (int d = 0; d < 2; ++d) {
    const double a = -kBox - lo[d] * scale, b = kBox - hi[d] * scale;
    shift[d] = a < b ? rng.uniform(a, b) : (a + b) / 2;
  }
  for (auto& p : points)
    for (int d = 0; d < 2; ++d) p[d] = p[d] * scale + shift[d];
}

Merges relabel(const Merges& merges, int64_t leaves, const std::vector<int64_t>& new_id) {
  const int64_t m = static_cast<int64_t>(merges.size());
  std::vector<int64_t> height(leaves + m, 0), renamed(leaves + m, -1);
  for (int64_t k = 0; k < m; ++k) height[leaves + k] = 1 + std::max(height[merges[k][0]], height[merges[k][1]]);
  for (int64_t i = 0; i < leaves; ++i) renamed[i] = new_id[i];
  std::vector<int64_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return height[leaves + a] < height[leaves + b]; });
  Merges out;
  out.reserve(m);
  for (int64_t start = 0; start < m;) {
    int64_t end = start;
    const int64_t h = height[leaves + order[start]];
    std::vector<std::pair<std::array<int64_t, 2>, int64_t>> level;  // (children, old merge)
    for (; end < m && height[leaves + order[end]] == h; ++end) {
      const auto& c = merges[order[end]];
      const int64_t a = renamed[c[0]], b = renamed[c[1]];
      level.push_back({{std::min(a, b), std::max(a, b)}, order[end]});
    }
    std::sort(level.begin(), level.end());
    for (const auto& [children, old] : level) {
      renamed[leaves + old] = leaves + static_cast<int64_t>(out.size());
      out.push_back(children);
    }
    start = end;
  }
  return out;
}

TreeSample tree_sample(int64_t tokens, const LayoutParams& params, uint64_t seed) {
  Rng rng(seed);
  Layout layout = balanced_layout(tokens, params, rng);
  fit_into_box(layout.leaves, rng);
  const auto perm = rng.permutation(tokens);
  TreeSample sample;
  sample.leaves.resize(tokens);
  for (int64_t i = 0; i < tokens; ++i) sample.leaves[perm[i]] = layout.leaves[i];
  sample.merges = relabel(layout.merges, tokens, perm);
  return sample;
}

MirroredSample mirrored_sample(int64_t tokens, const LayoutParams& params, uint64_t seed, bool exact) {
  TreeSample tree = tree_sample(tokens, params, seed);
  Rng coin(seed ^ 0x6a09e667f3bcc909ULL);  // a stream of its own: the layout's draws are Trees'
  std::vector<double> sign(tokens, 1.0);
  for (const auto& merge : tree.merges)
    if (merge[0] < tokens && merge[1] < tokens) {
      const int64_t flipped = coin.below(2);
      sign[merge[flipped]] = -1.0;
      if (exact) tree.leaves[merge[flipped]] = tree.leaves[merge[1 - flipped]];
    }
  MirroredSample sample;
  sample.merges = tree.merges;
  for (int64_t i = 0; i < tokens; ++i)
    sample.tokens.push_back({sign[i] * tree.leaves[i][0], sign[i] * tree.leaves[i][1], sign[i]});
  return sample;
}

CrossSample cross_sample(int64_t crosses, const CrossParams& params, uint64_t seed) {
  Rng rng(seed);
  const Layout layout = balanced_layout(crosses, params.layout, rng);
  // Half-lengths below half the nearest sibling distance keep neighbouring crosses apart.
  const bool single = crosses == 1;
  const double unit = single ? 1.0 : layout.deepest_distance;
  const double lo = single ? 0.3 : 0.25, hi = single ? 0.6 : 0.45;
  const double min_angle = radians(params.min_angle);
  std::vector<Point> ends;  // segment s has endpoints 2s, 2s+1; cross c has segments 2c, 2c+1
  for (const auto& c : layout.leaves) {
    const double alpha = rng.uniform(0, kPi);
    const double beta = rng.uniform(min_angle, kPi - min_angle);
    for (const double angle : {alpha, alpha + beta}) {
      const double h = rng.uniform(lo, hi) * unit;
      const double dx = h * std::cos(angle), dy = h * std::sin(angle);
      ends.push_back({c[0] - dx, c[1] - dy});
      ends.push_back({c[0] + dx, c[1] + dy});
    }
  }
  fit_into_box(ends, rng, !single);

  const int64_t segments = 2 * crosses;
  Merges merges;
  for (int64_t c = 0; c < crosses; ++c) merges.push_back({2 * c, 2 * c + 1});
  // Layout node x (leaf c = cross c, internal crosses + j) is node segments + x here.
  for (const auto& m : layout.merges) merges.push_back({segments + m[0], segments + m[1]});

  const auto perm = rng.permutation(segments);
  CrossSample sample;
  sample.segments.resize(segments);
  for (int64_t s = 0; s < segments; ++s) {
    Point a = ends[2 * s], b = ends[2 * s + 1];
    if (as_float(b) < as_float(a)) std::swap(a, b);  // the order the float tensors will show
    sample.segments[perm[s]] = {a[0], a[1], b[0], b[1]};
  }
  sample.merges = relabel(merges, segments, perm);
  return sample;
}

}  // namespace htm::data
