// `htm export RUN|EXPERIMENT`: a run's or a study's metrics as one CSV table (pandas, R, a
// spreadsheet), as TensorBoard event files (tensorboard.h: written by htm, no new dependency;
// W&B and Aim import them), or one run's trained weights for Python (export_weights.h).
// docs/report.md, "Tags, notes and export".
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <boost/program_options.hpp>

#include "commands/commands.h"
#include "commands/export_weights.h"
#include "commands/table.h"
#include "commands/tensorboard.h"
#include "config/settings.h"
#include "htm/error.h"
#include "store/results_store.h"
#include "train/checkpoint_file.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace htm {
namespace {

void export_csv(ResultsStore& store, const std::string& where, const SqlValue& key, const std::string& out) {
  // Values at full precision: printf('%!.17g') (SQLite's plain %.17g stops at 15 digits), not the tables' six.
  const auto rows = store.query(
      "SELECT r.id, e.name, r.variant, r.seed, r.status, r.config_hash, m.split, m.name, m.step, m.epoch, "
      "CASE WHEN m.value IS NULL THEN '' ELSE printf('%!.17g', m.value) END, printf('%.3f', m.time) "
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
}

// A folder or file name anything accepts: letters, digits, '.', '_' and '-'; the rest become '_'.
std::string safe_name(const std::string& text) {
  std::string out;
  for (char c : text)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

// A Markdown table cell (TensorBoard's text plugin renders Markdown): code, '|' escaped.
std::string markdown_code(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return "`" + out + "`";
}

struct StoredRun {
  int64_t id = 0, seed = 0;
  std::string experiment, variant, status, host, config_hash, git_revision, started;
  double started_at = NAN;
};

std::vector<StoredRun> stored_runs(ResultsStore& store, const std::string& where, const SqlValue& key) {
  std::vector<StoredRun> runs;
  store.scan(
      "SELECT r.id, e.name, r.variant, r.seed, r.status, r.started_at, r.host, r.config_hash, r.git_revision, "
      "datetime(r.started_at, 'unixepoch') FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE " +
          where + " ORDER BY r.id",
      {key}, [&](const Row& row) {
        runs.push_back({row.integer(0), row.integer(3), row.text(1), row.text(2), row.text(4), row.text(6), row.text(7),
                        row.text(8), row.text(9), row.real(5)});
      });
  return runs;
}

// The run's settings as the text plugin shows them: a Markdown table, one row per params key.
std::string settings_markdown(ResultsStore& store, int64_t run) {
  std::string text = "| setting | value |\n|---|---|\n";
  store.scan("SELECT key, value FROM params WHERE run_id = ? ORDER BY key", {run}, [&](const Row& row) {
    text += "| " + markdown_code(row.text(0)) + " | " + markdown_code(row.text(1)) + " |\n";
  });
  return text;
}

std::string run_markdown(const StoredRun& r) {
  return "| run | value |\n|---|---|\n| id | " + std::to_string(r.id) + " |\n| experiment | " +
         markdown_code(r.experiment) + " |\n| variant | " + markdown_code(r.variant) + " |\n| seed | " +
         std::to_string(r.seed) + " |\n| status | " + r.status + " |\n| started | " + r.started +
         " UTC |\n| config hash | " + markdown_code(r.config_hash) + " |\n| git revision | " +
         markdown_code(r.git_revision) + " |\n";
}

// One folder per run, DIR/<experiment>/<variant>/seed_<seed>; runs that would share one (a
// rerun of a seed, names alike once made safe) each get their id appended: seed_<seed>_run<id>.
void export_tensorboard(ResultsStore& store, const std::vector<StoredRun>& runs, const std::string& dir) {
  std::map<fs::path, int> uses;
  std::vector<fs::path> folders;
  for (const auto& r : runs) {
    folders.push_back(fs::path(dir) / safe_name(r.experiment) / safe_name(r.variant) /
                      ("seed_" + std::to_string(r.seed)));
    ++uses[folders.back()];
  }
  size_t scalars = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const StoredRun& r = runs[i];
    fs::path folder = folders[i];
    if (uses[folder] > 1) folder += "_run" + std::to_string(r.id);
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) throw Error("cannot create '" + folder.string() + "': " + ec.message());
    // Named after when and where the run started: exporting again replaces the file.
    const double start = std::isfinite(r.started_at) ? r.started_at : 0.0;
    const fs::path path = folder / tensorboard::event_file_name(start, safe_name(r.host.empty() ? "unknown" : r.host));
    tensorboard::EventFile file(path.string(), start);
    file.write(tensorboard::text_event(start, 0, "settings", settings_markdown(store, r.id)));
    file.write(tensorboard::text_event(start, 0, "run", run_markdown(r)));
    size_t n = 0;
    // In the order they were logged; a NULL (a NaN, which SQLite cannot hold) is a NaN again.
    store.scan(
        "SELECT split || '/' || name, step, value, time FROM metrics WHERE run_id = ? ORDER BY step, time, rowid",
        {r.id}, [&](const Row& row) {
          file.write(
              tensorboard::scalar_event(row.real(3), row.integer(1), row.text(0), static_cast<float>(row.real(2))));
          ++n;
        });
    file.close();
    scalars += n;
    std::fprintf(stderr, "run %lld: %zu scalars to %s\n", static_cast<long long>(r.id), n, path.c_str());
  }
  std::fprintf(stderr, "%zu run(s), %zu scalars written under %s (tensorboard --logdir %s)\n", runs.size(), scalars,
               dir.c_str(), dir.c_str());
}

void export_weights(ResultsStore& store, int64_t run_id, const std::string& out) {
  const auto rows = store.query(
      "SELECT r.id, e.name, r.variant, r.seed, r.status, r.config_hash, r.git_revision, r.torch_version, "
      "r.htm_version, r.host, r.artifact_dir, r.config_toml FROM runs r JOIN experiments e ON e.id = r.experiment_id "
      "WHERE r.id = ?",
      {run_id});
  const auto& row = rows.rows.at(0);
  WeightsExport what;
  what.checkpoint = readable_checkpoint(run_id, row[10], row[4]);  // the last one the trainer wrote
  const char* names[] = {"id",           "experiment",    "variant",     "seed", "status",       "config_hash",
                         "git_revision", "torch_version", "htm_version", "host", "artifact_dir", "config_toml"};
  for (size_t c = 0; c < row.size(); ++c) {
    if (c == 0 || c == 3)
      what.run.emplace_back(names[c], static_cast<int64_t>(row[c].empty() ? 0 : std::stoll(row[c])));
    else
      what.run.emplace_back(names[c], row[c]);
  }
  for (const auto& p : store.query("SELECT key, value FROM params WHERE run_id = ? ORDER BY key", {run_id}).rows)
    what.settings.emplace_back(p[0], p[1]);
  const WeightsWritten written = write_weights(what, out);
  if (row[4] != "finished")
    std::fprintf(stderr, "note: run %s is %s; these are its last checkpoint's weights\n", row[0].c_str(),
                 row[4].c_str());
  std::fprintf(stderr, "run %s: %zu parameters and %zu buffers (checkpoint of step %lld) written to %s\n",
               row[0].c_str(), written.parameters, written.buffers, static_cast<long long>(written.step), out.c_str());
}

}  // namespace

int cmd_export(const Args& args) {
  po::options_description opts("options");
  std::string what, format, out, db;
  opts.add_options()("what", po::value(&what)->required(), "a run id, or an experiment name (every run of it)")(
      "format,f", po::value(&format)->default_value("csv"),
      "csv (metrics), tensorboard (a folder of event files per run) or weights (one run's trained tensors "
      "and settings, for Python's torch.load)")(
      "out,o", po::value(&out), "file to write (csv: default standard output), or folder (tensorboard)")(
      "db", po::value(&db)->default_value(kDefaultResultsPath), "results database");
  po::positional_options_description pos;
  pos.add("what", 1);
  po::variables_map vm;
  if (!parse_options("export", args, opts, pos, vm, "RUN|EXPERIMENT [--format csv|tensorboard|weights] [-o FILE|DIR]"))
    return 0;
  if (format != "csv" && format != "tensorboard" && format != "weights")
    throw Error("--format must be csv, tensorboard or weights, not '" + format + "'");
  const bool is_run = !what.empty() && what.find_first_not_of("0123456789") == std::string::npos;
  if (format == "tensorboard" && out.empty()) throw Error("--format tensorboard writes a folder: name it with -o DIR");
  if (format == "weights" && !is_run)
    throw Error("--format weights exports one run: give its id (`htm runs -e " + what + "` lists them)");
  if (format == "weights" && out.empty()) throw Error("--format weights writes a file: name it with -o FILE.pt");
  ResultsStore store(db, OpenMode::read_only);
  const std::string where = is_run ? "r.id = ?" : "e.name = ?";
  const SqlValue key = is_run ? SqlValue(static_cast<int64_t>(std::stoll(what))) : SqlValue(what);
  const std::vector<StoredRun> runs = stored_runs(store, where, key);
  if (runs.empty())
    throw Error(std::string(is_run ? "no run " : "no runs of experiment '") + what + (is_run ? "" : "'") + " in " +
                store.path() + " (`htm runs` lists what is there)");
  if (format == "csv") export_csv(store, where, key, out);
  if (format == "tensorboard") export_tensorboard(store, runs, out);
  if (format == "weights") export_weights(store, runs[0].id, out);
  return 0;
}
const RegisterCommand register_export(
    100, "export", "a run's or a study's metrics as CSV or TensorBoard files; a run's weights for Python", cmd_export);

}  // namespace htm
