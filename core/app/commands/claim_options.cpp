#include "commands/claim_options.h"

#include <boost/program_options.hpp>

#include "study/comparison.h"

namespace po = boost::program_options;

namespace htm {

void add_claim_options(po::options_description& opts, ClaimOptions& claims) {
  opts.add_options()(
      "adjust", po::value(&claims.adjust)->default_value("holm"),
      "p-value adjustment over every comparison of a phase (variants x metrics): holm, bonferroni or none")(
      "target", po::value(&claims.targets)->composing(),
      "a claim to check, e.g. 'cluster_f1>=0.9': the one-sided 95% bound of each variant's mean, met or not")(
      "collapse", po::value(&claims.collapse)->default_value(-1),
      "count the runs whose last value is more than this below their own peak (e.g. 0.2 for F1)");
}

std::pair<stats::Adjustment, std::vector<stats::Target>> parse_claims(const ClaimOptions& claims,
                                                                      const std::string& split) {
  std::vector<stats::Target> targets;
  for (const auto& text : claims.targets) {
    targets.push_back(stats::parse_target(text));
    targets.back().metric = qualified_metric(targets.back().metric, split);
  }
  return {stats::parse_adjustment(claims.adjust), targets};
}

}  // namespace htm
