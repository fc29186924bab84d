// Hidden pairs (issue 63): tokens whose partners are correlated through a fixed reflection R but
// no more similar than strangers, optionally nested in quads, octets, ... hidden the same way; a
// wrong pairing must lose information. Data follow the run's seed, so a confirmation seed is a
// fresh sample of the data, not only of the weights.
#include <cmath>

#include "generated.h"  // plugins/dataset/trees
#include "pairs_data.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"pairs",
          htm::PluginKind::dataset,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Generated hidden pairs: token pairs a = [s; p], b = [R s; q] with R a fixed symmetric reflection, "
          "optionally nested (upper levels); shuffled; partners as far apart as strangers, found by a bilinear "
          "score, not by distance; "
          "true tree in Batch::tree; data drawn from the run's seed",
          {{"tokens", ValueType::integer, int64_t{16},
            "tokens per sample, a multiple of 2^levels (levels = 1 + the entries of upper): tokens/2 hidden pairs"},
           {"shared", ValueType::integer, int64_t{14}, "coordinates a pair shares through R (even, at least 2)"},
           {"upper", ValueType::integer_list, std::vector<int64_t>{},
            "coordinates shared by each level of clusters above the pairs: entry l-2 for the clusters of 2^l "
            "tokens (quads, octets, ...), each a multiple of 2^l; empty: pairs only"},
           {"own", ValueType::integer, int64_t{2}, "coordinates each token holds alone (0 or more)"},
           {"sd", ValueType::floating, 0.25, "standard deviation of every coordinate before clipping (> 0)"},
           {"clip", ValueType::floating, 0.95, "coordinates are clipped to [-clip, clip] (> 0)"},
           {"train_size", ValueType::integer, int64_t{8192}, "training samples"},
           {"test_size", ValueType::integer, int64_t{1024}, "test samples"},
           {"seed", ValueType::integer, int64_t{0}, "generator seed, mixed with the run's seed"},
           {htm::kRunSeedParam, ValueType::integer, int64_t{0},
            "the run's seed, set by the host (htm run): the data follow it; an experiment file cannot set it"}}};
}

class Pairs : public htm::data::GeneratedSets {
 public:
  Pairs(const htm::Params& params, const htm::BuildContext&) : p_(checked(params)) {
    generate(params, p_.tokens, p_.features(), [&](uint64_t seed) {
      auto s = htm::data::pairs_sample(p_, seed);
      return std::make_pair(std::move(s.tokens), std::move(s.merges));
    });
  }

  std::vector<int64_t> sample_shape() const override { return {p_.tokens, p_.features()}; }

 private:
  static htm::data::PairsParams checked(const htm::Params& params) {
    using htm::Error;
    htm::data::PairsParams p{params.integer("tokens"), params.integer("shared"), params.integer("own"),
                             params.number("sd"),      params.number("clip"),    params.integers("upper")};
    if (p.upper.size() > 8)
      throw Error("pairs: upper may hold at most 8 levels, got " + std::to_string(p.upper.size()));
    for (size_t k = 0; k < p.upper.size(); ++k) {
      const int64_t members = int64_t{1} << (k + 2);
      if (p.upper[k] < members || p.upper[k] % members != 0)
        throw Error("pairs: upper[" + std::to_string(k) + "] (the clusters of " + std::to_string(members) +
                    " tokens) must be a positive multiple of " + std::to_string(members) + ", got " +
                    std::to_string(p.upper[k]));
    }
    const int64_t cluster = int64_t{1} << p.levels();
    if (p.tokens < cluster || p.tokens % cluster != 0)
      throw Error(cluster == 2 ? "pairs: tokens must be even and at least 2, got " + std::to_string(p.tokens)
                               : "pairs: tokens must be a positive multiple of " + std::to_string(cluster) + " (" +
                                     std::to_string(p.levels()) + " levels), got " + std::to_string(p.tokens));
    if (p.shared < 2 || p.shared % 2 != 0)
      throw Error("pairs: shared must be even and at least 2, got " + std::to_string(p.shared));
    if (p.own < 0) throw Error("pairs: own must be 0 or more, got " + std::to_string(p.own));
    if (!(p.sd > 0) || std::isinf(p.sd))  // an infinite sd leaves every coordinate at ±clip (or NaN)
      throw Error("pairs: sd must be a finite positive number, got " + htm::data::number_text(p.sd));
    if (!(p.clip > 0)) throw Error("pairs: clip must be positive, got " + htm::data::number_text(p.clip));
    check_sizes("pairs", params);
    return p;
  }

  htm::data::PairsParams p_;
};

}  // namespace

HTM_REGISTER_PLUGIN(Pairs, manifest)
