// A run's series as htm serve's pages draw them (serve_data.cpp): every point it logged, by series,
// read once for a run that no longer trains and then only its new rows for one that does
// (serve_series.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace htm {
class ResultsStore;
}

namespace htm::serve {

// One series of a run: every point it logged, by step (epoch NaN where none was logged).
struct Series {
  std::string metric;
  std::vector<int64_t> step;
  std::vector<double> value, time, epoch;
  bool epochs = false;
};
struct RunSeries {
  std::vector<Series> series;
  int64_t last = 0;  // the newest rowid
  size_t points = 0;
  double started = 0;  // the run's start: times are written from it
  // Every row read (those without a value too): how many, the sum of their steps, the newest rowid.
  int64_t rows = 0, seen = 0, steps = 0;
};

/// Run `run_id`'s series (NotFound when there is no such run): cached, shared, never changed.
std::shared_ptr<const RunSeries> run_series(ResultsStore& store, int64_t run_id);

/// How many times this process has read a run's series whole (the tests see a poll read only new rows).
int64_t whole_series_reads();

}  // namespace htm::serve
