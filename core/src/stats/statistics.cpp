#include "stats/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <boost/math/distributions/students_t.hpp>

#include "htm/error.h"

namespace htm::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double variance(const std::vector<double>& v) {
  if (v.size() < 2) return kNaN;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

double covariance(const std::vector<double>& a, const std::vector<double>& b) {
  const double ma = mean(a), mb = mean(b);
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - ma) * (b[i] - mb);
  return s / static_cast<double>(a.size() - 1);
}

// The two-sided quantile t_{(1+confidence)/2} and the one-sided t_{confidence} on df.
double t_quantile(double df, double probability) {
  return boost::math::quantile(boost::math::students_t_distribution<double>(df), probability);
}

double upper_tail(double t, double df) {  // P(T ≥ t)
  return boost::math::cdf(boost::math::complement(boost::math::students_t_distribution<double>(df), t));
}

TTest finish(TTest r, double confidence) {
  if (!(r.se > 0) || !std::isfinite(r.se) || !(r.df > 0)) {
    r.t = r.df = r.p = r.ci_low = r.ci_high = r.se = kNaN;
    return r;
  }
  r.t = r.diff / r.se;
  r.p = std::min(1.0, 2 * upper_tail(std::abs(r.t), r.df));
  const double q = t_quantile(r.df, (1 + confidence) / 2);
  r.ci_low = r.diff - q * r.se;
  r.ci_high = r.diff + q * r.se;
  return r;
}

}  // namespace

double mean(const std::vector<double>& v) {
  if (v.empty()) return kNaN;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double sd(const std::vector<double>& v) { return std::sqrt(variance(v)); }

const char* test_name(TestKind kind) { return kind == TestKind::paired ? "paired t" : "Welch t"; }

TTest welch_test(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  TTest r;
  r.kind = TestKind::welch;
  r.diff = mean(a) - mean(b);
  if (a.size() < 2 || b.size() < 2) return finish(r, confidence);
  const double va = variance(a) / static_cast<double>(a.size()), vb = variance(b) / static_cast<double>(b.size());
  r.se = std::sqrt(va + vb);
  r.df = (va + vb) * (va + vb) /
         (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  return finish(r, confidence);
}

TTest paired_test(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  if (a.size() != b.size()) throw Error("a paired test needs as many values on each side");
  TTest r;
  r.kind = TestKind::paired;
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  r.diff = mean(d);
  if (d.size() < 2) return finish(r, confidence);
  r.se = sd(d) / std::sqrt(static_cast<double>(d.size()));
  r.df = static_cast<double>(d.size() - 1);
  return finish(r, confidence);
}

Effect percent_effect(const std::vector<double>& a, const std::vector<double>& b, const TTest& test,
                      double confidence) {
  Effect e;
  const double ma = mean(a), mb = mean(b);
  e.percent = mb != 0 ? 100 * (ma / mb - 1) : kNaN;
  e.ci_low = e.ci_high = kNaN;
  if (mb == 0 || std::isnan(test.df) || a.size() < 2 || b.size() < 2) return e;
  // Var(Ā/B̄) ≈ (Var Ā + R² Var B̄ − 2R Cov(Ā, B̄)) / B̄², R = Ā/B̄.
  const double ratio = ma / mb, na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  double var = variance(a) / na + ratio * ratio * variance(b) / nb;
  if (test.kind == TestKind::paired) var -= 2 * ratio * covariance(a, b) / na;
  const double se = std::sqrt(std::max(0.0, var)) / std::abs(mb);
  const double q = t_quantile(test.df, (1 + confidence) / 2);
  e.ci_low = 100 * (ratio - q * se - 1);
  e.ci_high = 100 * (ratio + q * se - 1);
  return e;
}

namespace {

// "metric>=value" for --target and --margin (`example` says what was expected).
Target parse_claim(const std::string& option, const std::string& text, const std::string& example) {
  Target target;
  target.text = text;
  const size_t at = text.find_first_of("<>");
  const auto bad = [&](const std::string& why) { return Error(option + " " + text + ": " + why + "; " + example); };
  if (at == std::string::npos || at == 0) throw bad("no comparison");
  target.metric = text.substr(0, at);
  target.at_least = text[at] == '>';
  size_t value_at = at + 1;
  if (value_at < text.size() && text[value_at] == '=') ++value_at;
  const std::string value = text.substr(value_at);
  size_t used = 0;
  try {
    target.threshold = std::stod(value, &used);
  } catch (const std::exception&) {
    throw bad("'" + value + "' is not a number");
  }
  if (used != value.size() || !std::isfinite(target.threshold)) throw bad("'" + value + "' is not a number");
  return target;
}

}  // namespace

Target parse_target(const std::string& text) {
  return parse_claim("--target", text, "expected METRIC>=VALUE or METRIC<=VALUE, e.g. cluster_f1>=0.9");
}

Margin parse_margin(const std::string& text) {
  const bool percent = !text.empty() && text.back() == '%';
  const Target claim = parse_claim("--margin", percent ? text.substr(0, text.size() - 1) : text,
                                   "expected METRIC>=MARGIN or METRIC<=MARGIN, the margin in % of the reference's "
                                   "mean or in the metric's units, e.g. cluster_f1>=-1% or mse<=0.002");
  Margin margin;
  margin.metric = claim.metric;
  margin.at_least = claim.at_least;
  margin.value = claim.threshold;
  margin.percent = percent;
  margin.text = text;
  return margin;
}

MarginCheck check_margin(const TTest& test, double reference_mean, const Margin& margin, double confidence) {
  MarginCheck c;
  c.threshold = margin.percent ? margin.value / 100 * std::abs(reference_mean) : margin.value;
  if (!(test.se > 0) || !(test.df > 0)) {
    c.bound = c.p = kNaN;
    return c;
  }
  const double sign = margin.at_least ? 1 : -1;  // the claim: sign·(diff − threshold) > 0
  c.bound = test.diff - sign * t_quantile(test.df, confidence) * test.se;
  c.p = upper_tail(sign * (test.diff - c.threshold) / test.se, test.df);
  c.met = sign * (c.bound - c.threshold) >= 0;
  return c;
}

TargetCheck check_target(const std::vector<double>& values, const Target& target, double confidence) {
  TargetCheck c;
  c.bound = c.p = kNaN;
  if (values.size() < 2) return c;
  const double m = mean(values), se = sd(values) / std::sqrt(static_cast<double>(values.size()));
  const double df = static_cast<double>(values.size() - 1);
  const double sign = target.at_least ? 1 : -1;  // the claim: sign·(mean − threshold) > 0
  if (se == 0) {                                 // every run the same: the bound is the value itself
    c.bound = m;
    c.p = sign * (m - target.threshold) > 0 ? 0 : 1;
  } else {
    c.bound = m - sign * t_quantile(df, confidence) * se;
    c.p = upper_tail(sign * (m - target.threshold) / se, df);
  }
  c.met = sign * (c.bound - target.threshold) >= 0;
  return c;
}

Adjustment parse_adjustment(const std::string& text) {
  if (text == "holm") return Adjustment::holm;
  if (text == "bonferroni") return Adjustment::bonferroni;
  if (text == "none") return Adjustment::none;
  throw Error("--adjust " + text + ": expected holm, bonferroni or none");
}

const char* adjustment_name(Adjustment adjustment) {
  switch (adjustment) {
    case Adjustment::holm:
      return "holm";
    case Adjustment::bonferroni:
      return "bonferroni";
    case Adjustment::none:
      return "none";
  }
  return "";
}

std::vector<double> adjust(const std::vector<double>& p, Adjustment adjustment) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i)
    if (!std::isnan(p[i])) order.push_back(i);
  std::vector<double> out = p;
  const double m = static_cast<double>(order.size());
  if (adjustment == Adjustment::none) return out;
  if (adjustment == Adjustment::bonferroni) {
    for (size_t i : order) out[i] = std::min(1.0, m * p[i]);
    return out;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] < p[y]; });
  double running = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    running = std::max(running, std::min(1.0, (m - static_cast<double>(k)) * p[order[k]]));
    out[order[k]] = running;
  }
  return out;
}

}  // namespace htm::stats
