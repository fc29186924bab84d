// `htm export RUN|EXPERIMENT --format csv`: a run's or a study's metrics as one CSV table, for
// pandas, R or a spreadsheet. TensorBoard event files are not written: Debian 12 packages no C++
// writer for them (docs/report.md).
#include <cstdio>
#include <fstream>
#include <iostream>

#include <boost/program_options.hpp>

#include "commands/commands.h"
#include "config/settings.h"
#include "htm/error.h"
#include "store/results_store.h"

namespace po = boost::program_options;

namespace htm {
namespace {

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

int cmd_export(const Args& args) {
  po::options_description opts("options");
  std::string what, format, out, db;
  opts.add_options()("what", po::value(&what)->required(), "a run id, or an experiment name (every run of it)")(
      "format,f", po::value(&format)->default_value("csv"), "csv (tensorboard: not available, see docs/report.md)")(
      "out,o", po::value(&out), "file to write (default: standard output)")(
      "db", po::value(&db)->default_value(kDefaultResultsPath), "results database");
  po::positional_options_description pos;
  pos.add("what", 1);
  po::variables_map vm;
  if (!parse_options("export", args, opts, pos, vm, "RUN|EXPERIMENT [--format csv] [-o FILE]")) return 0;
  if (format == "tensorboard")
    throw Error(
        "--format tensorboard is not available: Debian 12 packages no C++ writer of TensorBoard event "
        "files; export csv and load it with pandas");
  if (format != "csv") throw Error("--format must be csv, not '" + format + "'");
  ResultsStore store(db, OpenMode::read_only);
  const bool is_run = !what.empty() && what.find_first_not_of("0123456789") == std::string::npos;
  const std::string where = is_run ? "r.id = ?" : "e.name = ?";
  const SqlValue key = is_run ? SqlValue(static_cast<int64_t>(std::stoll(what))) : SqlValue(what);
  if (store.query("SELECT 1 FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE " + where, {key})
          .rows.empty())
    throw Error(std::string(is_run ? "no run " : "no runs of experiment '") + what + (is_run ? "" : "'") + " in " +
                store.path() + " (`htm runs` lists what is there)");
  // Values at full precision: printf('%.17g') rather than the tables' six digits.
  const auto rows = store.query(
      "SELECT r.id, e.name, r.variant, r.seed, r.status, r.config_hash, m.split, m.name, m.step, m.epoch, "
      "CASE WHEN m.value IS NULL THEN '' ELSE printf('%.17g', m.value) END, printf('%.3f', m.time) "
      "FROM metrics m JOIN runs r ON r.id = m.run_id JOIN experiments e ON e.id = r.experiment_id WHERE " +
          where + " ORDER BY r.id, m.split, m.name, m.step, m.rowid",
      {key});
  std::ofstream file;
  if (!out.empty()) {
    file.open(out);
    if (!file) throw Error("cannot write '" + out + "'");
  }
  std::ostream& sink = out.empty() ? std::cout : file;
  sink << "run_id,experiment,variant,seed,status,config_hash,split,metric,step,epoch,value,time\n";
  for (const auto& row : rows.rows) {
    for (size_t c = 0; c < row.size(); ++c) sink << (c ? "," : "") << csv_cell(row[c]);
    sink << "\n";
  }
  sink.flush();
  if (!sink) throw Error("cannot write '" + (out.empty() ? std::string("standard output") : out) + "'");
  if (!out.empty()) std::fprintf(stderr, "%zu metric rows written to %s\n", rows.rows.size(), out.c_str());
  return 0;
}

}  // namespace htm
