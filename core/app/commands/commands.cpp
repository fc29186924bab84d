#include "commands/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include <boost/program_options.hpp>

#include "commands/runner.h"
#include "commands/sample.h"
#include "commands/table.h"
#include "config/settings.h"
#include "dist/communicator.h"
#include "htm/error.h"
#include "process/launch.h"
#include "process/signals.h"
#include "process/supervise.h"
#include "registry.h"
#include "store/names.h"
#include "store/results_store.h"
#include "study/comparison.h"

namespace po = boost::program_options;

namespace htm {
namespace {

void usage() {
  std::printf("usage: htm <command> [options]   (htm <command> --help for its options; htm --version)\n\n");
  for (const auto& c : registered_commands()) std::printf("  %-12s %s\n", c.name, c.summary);
  std::printf(
      "\nplugins are searched in HTM_PLUGIN_PATH (':'-separated), then the build's and the\n"
      "installed plugin folders\n");
}

}  // namespace

std::pair<std::string, std::string> key_value(const std::string& option, const std::string& text) {
  const size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0) throw Error(option + " " + text + ": expected key=value");
  return {text.substr(0, equals), text.substr(equals + 1)};
}

bool parse_options(const std::string& command, const Args& args, po::options_description& options,
                   const po::positional_options_description& positional, po::variables_map& vm, const char* synopsis) {
  options.add_options()("help,h", "show this help");
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: htm " << command << " " << synopsis << "\n\n" << options;
    return false;
  }
  po::notify(vm);
  return true;
}

int cmd_run(const Args& args) {
  po::options_description opts("options");
  RunRequest req;
  bool force = false;
  opts.add_options()("file", po::value(&req.file)->required(), "experiment file (TOML)")(
      "variant,v", po::value(&req.variants)->composing(), "variant to run (repeatable; default: all)")(
      "seed,s", po::value(&req.seeds)->composing(), "seed to run (repeatable; default: the file's seeds)")(
      "confirm", po::bool_switch(&req.confirm),
      "run the --variant(s) on the file's confirmation seeds (experiment.confirm_seeds, default 1000-1009), "
      "tagged phase=confirm; exploration never uses those seeds; refused where an earlier run drew a seed's "
      "data")("reuse-seeds", po::bool_switch(&req.reuse_seeds),
              "with --confirm: run seeds whose data earlier runs drew (the confirmation is then not on fresh data)")(
      "set", po::value(&req.overrides)->composing(), "override a setting, e.g. --set train.epochs=2")(
      "sweep", po::value(&req.sweeps)->composing(),
      "one variant per value, e.g. --sweep train.lr=1e-3,3e-3 (a [grid] axis)")(
      "jobs,j", po::value(&req.jobs)->default_value(1), "runs executed at once, each in its own process")(
      "rerun", po::bool_switch(&req.rerun), "run again even if a finished run with this config exists")(
      "ignore-memory", po::bool_switch(&req.ignore_memory),
      "train even when the memory estimate exceeds the memory available")("force", po::bool_switch(&force),
                                                                          "(split: --rerun and --ignore-memory)")(
      "tag", po::value(&req.tags)->composing(),
      "key=value stored on each run (repeatable; htm runs and report show it)")(
      "note", po::value(&req.note), "free text stored on each run as the tag 'note'")(
      "quiet,q", "no progress lines: only each run's final lines and errors")(
      "verbose", "also a line per evaluation with its scores")(
      "nproc", po::value(&req.nproc)->default_value(1),
      "data-parallel processes per run on this host (a multi-host run reads torchrun's RANK, WORLD_SIZE, "
      "MASTER_ADDR, MASTER_PORT instead)")("shard", po::value(&req.shard),
                                           "K/N: run only the K-th (0-based) of N slices of the variant x seed list")(
      "db", po::value<std::string>(), "results database (same as --set runtime.results=PATH)");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_options("run", args, opts, pos, vm, "FILE [options]")) return 0;
  if (force)
    throw Error(
        "--force was split in two: --rerun runs again a run already finished, --ignore-memory trains a run "
        "the memory estimate refuses");
  if (req.jobs < 1) throw Error("--jobs must be at least 1");
  if (req.nproc < 1) throw Error("--nproc " + std::to_string(req.nproc) + ": must be at least 1");
  if (!req.shard.empty()) parse_shard(req.shard);  // refused before anything runs
  if (vm.count("db")) req.overrides.push_back("runtime.results=" + to_toml(Value(vm["db"].as<std::string>())));
  if (vm.count("quiet") && vm.count("verbose")) throw Error("--quiet and --verbose contradict each other");
  if (req.reuse_seeds && !req.confirm) throw Error("--reuse-seeds goes with --confirm");
  req.verbosity = vm.count("quiet") ? 0 : vm.count("verbose") ? 2 : 1;
  for (const auto& tag : req.tags) key_value("--tag", tag);  // refused before anything runs
  Registry registry;
  set_graceful_stop(true);  // Ctrl-C checkpoints and records the run interrupted
  req.supervise = true;     // a crash costs one run, not the study (docs/reliability.md)
  return run_experiment(req, registry);
}
const RegisterCommand register_run(10, "run",
                                   "run every variant x seed of an experiment file (resuming unfinished ones)",
                                   cmd_run);

int cmd_resume(const Args& args) {
  po::options_description opts("options");
  int64_t run_id = 0;
  std::string db;
  std::vector<std::string> overrides, sweeps;
  opts.add_options()("run", po::value(&run_id)->required(), "run id (see htm runs): an interrupted or killed run")(
      "set", po::value(&overrides)->composing(), "the --set options the run was started with")(
      "sweep", po::value(&sweeps)->composing(), "the --sweep options the run was started with")(
      "force", "retry a run that crashed twice at the same step (htm run leaves it alone)")(
      "db", po::value(&db)->default_value(kDefaultResultsPath), "results database");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse_options("resume", args, opts, pos, vm, "RUN [--set k=v ...] [--db PATH]")) return 0;
  if (world_from_environment())
    throw Error(
        "htm resume runs in one process; a data-parallel run resumes with the command that started it "
        "(htm run FILE --nproc N, or the same launcher): it continues unfinished runs");
  set_graceful_stop(true);
  if (!supervised_child()) {  // the run trains in a supervised child, as under htm run
    std::vector<std::string> child = {self_path(), "resume"};
    child.insert(child.end(), args.begin(), args.end());
    return run_supervised(child, "run " + std::to_string(run_id));
  }
  Registry registry;
  return resume_run(run_id, db, overrides, sweeps, registry, vm.count("force") > 0);
}
const RegisterCommand register_resume(20, "resume",
                                      "continue an interrupted, killed or crashed run from its last checkpoint",
                                      cmd_resume);

int cmd_config(const Args& args) {
  po::options_description opts("options");
  std::string file;
  std::vector<std::string> variants, overrides, sweeps;
  opts.add_options()("file", po::value(&file)->required(), "experiment file (TOML)")(
      "variant,v", po::value(&variants)->composing(), "variant (repeatable; default: all)")(
      "set", po::value(&overrides)->composing(), "override a setting")(
      "sweep", po::value(&sweeps)->composing(), "one variant per value, e.g. --sweep train.lr=1e-3,3e-3")(
      "no-estimate", "skip building each variant for its parameter count and training memory estimate");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_options("config", args, opts, pos, vm, "FILE [options]")) return 0;
  const bool estimate = vm.count("no-estimate") == 0;
  Registry registry;
  ExperimentFile ex = ExperimentFile::load(file, overrides);
  for (const auto& sweep : sweeps) ex.add_sweep(sweep);
  for (const auto& v : variants.empty() ? ex.variants() : variants) {
    ResolvedConfig config = ex.resolve(v, registry);
    std::printf("# variant %s (config hash %s)\n%s\n", v.c_str(), config.hash.c_str(), config.toml.c_str());
    if (estimate) print_memory_estimate(config, registry);
  }
  return 0;
}
const RegisterCommand register_config(30, "config", "print the resolved config of an experiment's variants",
                                      cmd_config);

int cmd_plugins(const Args& args) {
  po::options_description opts("options");
  opts.add_options()("verbose", "also list each plugin's parameters");
  po::variables_map vm;
  if (!parse_options("plugins", args, opts, {}, vm, "[--verbose]")) return 0;
  Registry registry;
  QueryResult table;
  table.columns = {"kind", "name", "version", "abi", "description"};
  for (const auto& e : registry.entries())
    table.rows.push_back({kind_name(e.manifest.kind), e.manifest.name, e.manifest.version,
                          std::to_string(e.manifest.abi), e.manifest.description});
  std::printf("%s", format_table(table).c_str());
  if (vm.count("verbose")) {
    for (const auto& e : registry.entries()) {
      std::printf("\n%s %s  (%s)\n", kind_name(e.manifest.kind), e.manifest.name.c_str(), e.path.c_str());
      for (const auto& p : e.manifest.params)
        std::printf("  %-16s %-12s = %-24s %s\n", p.name.c_str(), type_name(p.type), to_toml(p.default_value).c_str(),
                    p.description.c_str());
    }
  }
  for (const auto& r : registry.rejected()) std::fprintf(stderr, "warning: %s\n", r.c_str());
  for (const auto& w : registry.warnings()) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::string path;
  for (const auto& p : registry.search_path()) path += (path.empty() ? "" : ":") + p;
  std::printf("\nsearch path: %s\n", path.c_str());
  return 0;
}
const RegisterCommand register_plugins(40, "plugins", "list the plugins found on the search path", cmd_plugins);

int cmd_db(const Args& args) {
  po::options_description opts("options");
  std::string action, db, out;
  opts.add_options()("action", po::value(&action)->required(), "check | recover")(
      "db", po::value(&db)->default_value(kDefaultResultsPath), "results database")(
      "out", po::value(&out), "recover: the new database to write (must not exist)");
  po::positional_options_description pos;
  pos.add("action", 1);
  po::variables_map vm;
  if (!parse_options("db", args, opts, pos, vm, "check|recover [--db PATH] [--out NEW]")) return 0;
  if (action != "check" && action != "recover") throw Error("htm db " + action + ": expected check or recover");
  if (action == "recover") {
    if (out.empty()) throw Error("htm db recover: name the new database with --out NEW");
    const RecoveryReport report = ResultsStore::recover_file(db, out);
    std::string rows;
    for (const auto& [table, n] : report.rows) rows += (rows.empty() ? "" : ", ") + table + " " + std::to_string(n);
    std::printf("read from %s: %s\n", db.c_str(), rows.c_str());
    for (const auto& lost : report.lost) std::printf("unreadable, skipped: %s\n", lost.c_str());
    if (report.lost.empty()) std::printf("every row was readable: the damage was in an index or in free pages\n");
    std::printf("%s: %lld runs, each tagged 'recovered'; htm db check --db %s checks it\n", out.c_str(),
                static_cast<long long>(report.runs), out.c_str());
    return 0;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(db, ec)) throw Error("results database '" + db + "': no such file");
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> complaints = ResultsStore::check_file(db, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mib = static_cast<double>(std::filesystem::file_size(db, ec)) / (1 << 20);
  if (complaints.empty()) {
    ResultsStore store(db, OpenMode::read_only);
    const auto counts = store.query("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM metrics)");
    std::printf("%s: integrity_check ok: %s runs, %s metric rows, %.1f MiB, checked in %.2f s\n", db.c_str(),
                counts.rows[0][0].c_str(), counts.rows[0][1].c_str(), mib, seconds);
    return 0;
  }
  std::printf("%s: malformed; SQLite's integrity_check says (first %zu):\n", db.c_str(), complaints.size());
  for (const auto& line : complaints) std::printf("  %s\n", line.c_str());
  std::printf(
      "htm writes nothing into it. Recover the runs SQLite can still read into a new file, check\n"
      "that, and name it with --db from then on (docs/reliability.md):\n"
      "  htm db recover --db %s --out recovered.sqlite\n"
      "  htm db check --db recovered.sqlite\n",
      db.c_str());
  return 1;
}
const RegisterCommand register_db(
    80, "db", "check a results database (SQLite's integrity check), or recover a damaged one's runs", cmd_db);

int cmd_query(const Args& args) {
  po::options_description opts("options");
  std::string db, sql;
  opts.add_options()("sql", po::value(&sql)->required(), "SQL statement")(
      "db", po::value(&db)->default_value(kDefaultResultsPath), "results database")(
      "write", "allow a statement that changes the database (UPDATE, DELETE, ...)");
  po::positional_options_description pos;
  pos.add("sql", 1);
  po::variables_map vm;
  if (!parse_options("query", args, opts, pos, vm, "\"SQL\" [--db PATH] [--write]")) return 0;
  const bool write = vm.count("write") > 0;
  ResultsStore store(db, write ? OpenMode::read_write : OpenMode::read_only);
  std::printf("%s", format_table(store.query(sql, {}, write)).c_str());
  return 0;
}
const RegisterCommand register_query(60, "query", "run SQL on the results database and print a table", cmd_query);

int cmd_merge(const Args& args) {
  po::options_description opts("options");
  std::string db;
  std::vector<std::string> others;
  opts.add_options()("other", po::value(&others)->required()->composing(), "database(s) to copy runs from")(
      "db", po::value(&db)->default_value(kDefaultResultsPath), "results database to merge into");
  po::positional_options_description pos;
  pos.add("other", -1);
  po::variables_map vm;
  if (!parse_options("merge", args, opts, pos, vm, "OTHER.sqlite... [--db PATH]")) return 0;
  ResultsStore store(db);
  for (const auto& other : others) {
    int64_t running = 0;
    const int64_t merged = store.merge_from(other, &running);
    std::printf("%s: %lld new runs merged into %s", other.c_str(), static_cast<long long>(merged),
                store.path().c_str());
    if (running > 0)
      std::printf(" (%lld still running there: merge again once they end)", static_cast<long long>(running));
    std::printf("\n");
  }
  return 0;
}
const RegisterCommand register_merge(70, "merge", "copy the runs of other databases into this one", cmd_merge);

int cmd_sample(const Args& args) {
  po::options_description opts("options");
  SampleRequest req;
  opts.add_options()("run", po::value(&req.run_id)->required(), "run id (see htm runs); it must have a checkpoint")(
      "count,n", po::value(&req.count)->default_value(16), "samples to generate")(
      "out,o", po::value(&req.out), "PNG to write (default: the run's artifact folder/samples.png)")(
      "components,k", po::value(&req.components)->default_value(8), "Gaussians in the mixture")(
      "covariance", po::value(&req.covariance)->default_value("auto"),
      "full, diag, or auto (full up to 128 dimensions, where EM stays fast)")(
      "fit-samples", po::value(&req.fit_samples)->default_value(2000), "training samples to fit the mixture to")(
      "seed", po::value(&req.seed)->default_value(0), "seed of the fit and the draws")(
      "decode", po::value(&req.decode)->default_value("classifier"),
      "sets: classifier (unmerge what the leaf/internal classifier calls internal) or schedule")(
      "leaf-threshold", po::value(&req.leaf_threshold)->default_value(0.5),
      "with --decode classifier: a token is a leaf when P(leaf) exceeds this")(
      "db", po::value(&req.db)->default_value(kDefaultResultsPath), "results database");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse_options("sample", args, opts, pos, vm, "RUN [-n N] [options]")) return 0;
  if (req.covariance != "full" && req.covariance != "diag" && req.covariance != "auto")
    throw Error("--covariance must be full, diag or auto, not '" + req.covariance + "'");
  if (req.decode != "classifier" && req.decode != "schedule")
    throw Error("--decode must be classifier or schedule, not '" + req.decode + "'");
  if (!(req.leaf_threshold > 0 && req.leaf_threshold < 1))
    throw Error("--leaf-threshold must lie strictly between 0 and 1");
  Registry registry;
  return sample_run(req, registry);
}
const RegisterCommand register_sample(130, "sample",
                                      "generate from a run: Gaussian mixture on root embeddings, then decode",
                                      cmd_sample);

int cmd_check_plugin(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf(
        "usage: htm check-plugin PLUGIN.so|FOLDER... [--param NAME=VALUE]... [--gtest_filter=PATTERN]\n\n"
        "Runs the conformance suite (shapes, gradients, determinism under a seed) on the named\n"
        "plugin libraries, or every library in the named folders, with htm-conformance. --param\n"
        "sets a parameter of the plugins under test (the torchscript plugins' path: a module of\n"
        "width 16, the suite's).\n");
    return args.empty() ? 2 : 0;
  }
  const auto beside = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "htm-conformance";
  if (!std::filesystem::exists(beside))
    throw Error("htm-conformance is not installed beside htm (" + beside.string() + "); build the tests");
  std::vector<std::string> words = {beside.string()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  unblock_signals();
  execv(argv[0], argv.data());
  throw Error("cannot run " + beside.string() + ": " + std::strerror(errno));
}
const RegisterCommand register_check_plugin(150, "check-plugin",
                                            "run the plugin conformance suite on plugin libraries (out of tree too)",
                                            cmd_check_plugin);

// An error's text for the terminal: one line. libtorch appends its C++ stack frames to what()
// ("Exception raised from ...", or "frame #0: ..." straight after an allocation failure); those
// go to a log file, named in the line.
std::string without_frames(const std::string& text) {
  const size_t frames = std::min(text.find("\nException raised from"), text.find("\nframe #"));
  std::string line = text.substr(0, frames);
  for (char& c : line)
    if (c == '\n') c = ' ';
  if (frames == std::string::npos) return line;
  std::error_code ec;
  const std::string log =
      (std::filesystem::temp_directory_path(ec) / ("htm-error-" + std::to_string(getpid()) + ".log")).string();
  if (FILE* out = std::fopen(log.c_str(), "w")) {
    std::fprintf(out, "%s\n", text.c_str());
    std::fclose(out);
    return line + " (C++ frames in " + log + ")";
  }
  return line;
}

int dispatch(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  if (name == "--version") {  // the revision a run records (build_revision.cpp)
    std::printf("htm %s (git revision %s)\n", HTM_VERSION, git_revision().c_str());
    return 0;
  }
  for (const auto& c : registered_commands()) {
    if (name != c.name) continue;
    try {
      return c.run(Args(argv + 2, argv + argc));
    } catch (const po::error& e) {
      std::fprintf(stderr, "error: htm %s: %s (see htm %s --help)\n", c.name, e.what(), c.name);
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", without_frames(e.what()).c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n\n", name.c_str());
  usage();
  return 2;
}

}  // namespace htm
