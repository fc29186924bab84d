// The claims `htm compare` and `htm report` take on their command lines: --adjust, --target and
// --collapse, read alike by both (the comparison itself: study/comparison.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <boost/program_options/options_description.hpp>

#include "stats/statistics.h"

namespace htm {

/// --adjust, --target and --collapse as given, for `htm compare` and `htm report` alike.
struct ClaimOptions {
  std::string adjust = "holm";
  std::vector<std::string> targets;
  double collapse = -1;
};
/// Adds the three options to `opts`.
void add_claim_options(boost::program_options::options_description& opts, ClaimOptions& claims);
/// Parses them: the adjustment, and the targets with their metrics qualified by `split`.
/// Throws htm::Error for an unknown adjustment or a target that cannot be read.
std::pair<stats::Adjustment, std::vector<stats::Target>> parse_claims(const ClaimOptions& claims,
                                                                      const std::string& split);

}  // namespace htm
