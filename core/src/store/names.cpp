#include "store/names.h"

#include <algorithm>

#include "htm/error.h"

namespace htm {

size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: Levenshtein's edits, and two neighbours swapped counts as one.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  std::string nearest;
  size_t best = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& c : candidates)
    if (const size_t d = edit_distance(name, c); d < best && c != name) best = d, nearest = c;
  return nearest;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string nearest = closest_name(name, candidates);
  return nearest.empty() ? "" : "; did you mean '" + nearest + "'?";
}

namespace {
std::pair<std::string, std::string> split_and_name(const std::string& metric) {
  const size_t slash = metric.find('/');
  if (slash == std::string::npos) return {"", metric};
  return {metric.substr(0, slash), metric.substr(slash + 1)};
}
}  // namespace

bool metric_logged(ResultsStore& store, const std::string& metric) {
  const auto [split, name] = split_and_name(metric);
  // Per run one seek of metrics_by_series (run_id, split, name, step); the first run that has it ends it.
  return !store
              .query(
                  "SELECT 1 FROM runs r WHERE EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.id AND "
                  "m.split = ? AND m.name = ?) LIMIT 1",
                  {split, name})
              .rows.empty();
}

std::vector<std::string> known_metrics(ResultsStore& store) {
  std::vector<int64_t> ids;
  for (const auto& row : store.query("SELECT max(id) FROM runs GROUP BY experiment_id, variant").rows)
    ids.push_back(std::stoll(row[0]));
  return store.metric_names(ids);
}

void require_metric(ResultsStore& store, const std::string& what, const std::string& typed, const std::string& metric,
                    const std::vector<std::string>& others) {
  if (metric_logged(store, metric)) return;
  std::vector<std::string> names = others;
  const std::string split = split_and_name(metric).first + "/";
  for (const std::string& known : known_metrics(store))
    if (typed.find('/') != std::string::npos)
      names.push_back(known);
    else if (known.rfind(split, 0) == 0)
      names.push_back(known.substr(split.size()));
  throw Error(what + ": no run in " + store.path() + " logged a metric '" + metric + "'" + did_you_mean(typed, names));
}

bool setting_known(ResultsStore& store, const std::string& key) {
  return !store.query("SELECT 1 FROM params WHERE key = ? LIMIT 1", {key}).rows.empty();
}

std::vector<std::string> known_settings(ResultsStore& store) {
  std::vector<std::string> keys;
  for (const auto& row : store.query("SELECT DISTINCT key FROM params ORDER BY key").rows) keys.push_back(row[0]);
  return keys;
}

}  // namespace htm
