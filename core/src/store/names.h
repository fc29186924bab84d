// Names a user types (a setting, a metric, a sort key) checked against the real ones: a misspelt
// one is refused with the closest real name ("did you mean ...?"), by htm runs, htm report and
// htm serve alike.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "store/results_store.h"

namespace htm {

/// Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`.
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate closest to `name` when it is close enough to be a misspelling of it (at most
/// max(2, |name| / 3) edits), else "".
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);
/// "; did you mean 'X'?" for closest_name()'s X, else "".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

/// Whether any run in `store` logged `metric` (split/name): one index seek a run, stopping at the first.
bool metric_logged(ResultsStore& store, const std::string& metric);
/// The metrics (split/name, sorted) that the newest run of each experiment and variant logged:
/// what a misspelt metric is compared with (a few index seeks a run).
std::vector<std::string> known_metrics(ResultsStore& store);
/// Returns when some run logged `metric` (split/name), else throws htm::Error: "WHAT: no run in
/// FILE logged a metric 'test/x'; did you mean 'y'?" (WHAT: the option, e.g. "--metric x"). The
/// suggestion is spelt as `typed` was (a bare name: the bare names of metric's split) or is one of `others`.
void require_metric(ResultsStore& store, const std::string& what, const std::string& typed, const std::string& metric,
                    const std::vector<std::string>& others = {});

/// Whether any run has the setting `key` (as htm config prints it: model.dim).
bool setting_known(ResultsStore& store, const std::string& key);
/// Every setting any run has, sorted (one scan of the settings: only to name a misspelt one).
std::vector<std::string> known_settings(ResultsStore& store);

}  // namespace htm
