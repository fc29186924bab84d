// `htm serve`: its options, and the server run until Ctrl-C or SIGTERM (the server: web/serve.h).
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include <boost/program_options.hpp>

#include "commands/commands.h"
#include "config/settings.h"
#include "htm/error.h"
#include "web/serve.h"

namespace po = boost::program_options;

namespace htm {
namespace {
std::atomic<Server*> serving{nullptr};
extern "C" void stop_serving(int) {
  if (Server* s = serving.load()) s->stop();
}
// Waiting connections are file descriptors: the soft limit (often 1024) is raised to the hard one.
void raise_open_files() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int cmd_serve(const Args& args) {
  po::options_description opts("options");
  ServeOptions options;
  opts.add_options()("db", po::value(&options.db)->default_value(kDefaultResultsPath), "results database (read only)")(
      "port,p", po::value(&options.port)->default_value(8080), "TCP port (0: any free one, printed)")(
      "host", po::value(&options.host)->default_value("127.0.0.1"),
      "address to listen on; anything but 127.0.0.1, localhost or ::1 needs --token")(
      "token", po::value(&options.token), "secret every request must carry (?token=, a cookie, or a Bearer header)")(
      "threads", po::value(&options.threads)->default_value(64), "worker threads: connections served at once")(
      "timeout", po::value(&options.timeout_s)->default_value(10),
      "seconds a client may take to send a body or read the answer")(
      "header-timeout", po::value(&options.header_timeout_s)->default_value(5),
      "seconds a connection may take to send its request head (waiting costs no worker)")(
      "client-connections", po::value(&options.client_connections)->default_value(256),
      "connections one client address may hold at once (more are closed at once)")(
      "chart-js", po::value(&options.chart_js), "Chart.js file (default: Debian's libjs-chart.js)")(
      "allow-writes", po::bool_switch(&options.allow_writes),
      "take notes, tags, archive flags and saved views from the pages (needs --token; docs/serve.md)")(
      "artifacts", po::value(&options.artifact_roots)->composing(),
      "a folder whose runs' files are served though htm run did not mark it (repeatable; docs/serve.md)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_options("serve", args, opts, pos, vm,
                     "[--db FILE] [--port 8080] [--host 127.0.0.1] [--token T [--allow-writes]] [--artifacts DIR]"))
    return 0;
  if (options.threads < 2 || options.threads > 1024)
    throw Error("--threads " + std::to_string(options.threads) + ": expected 2 to 1024");
  if (options.timeout_s < 1) throw Error("--timeout " + std::to_string(options.timeout_s) + ": expected 1 or more");
  if (!(options.header_timeout_s >= 0.1 && options.header_timeout_s <= 3600))
    throw Error("--header-timeout " + std::to_string(options.header_timeout_s) + ": expected 0.1 to 3600 seconds");
  if (options.client_connections < 1 || options.client_connections > 65536)
    throw Error("--client-connections " + std::to_string(options.client_connections) + ": expected 1 to 65536");
  raise_open_files();
  Server server(options);
  const std::string host = options.host == "::1" ? "[::1]" : options.host;
  std::printf("htm serve: http://%s:%d/%s  (database %s, %s; Ctrl-C stops)\n", host.c_str(), server.port(),
              options.token.empty() ? "" : "?token=...", options.db.c_str(),
              options.allow_writes ? "read only but for notes, tags, archive flags and views" : "read only");
  std::fflush(stdout);
  serving = &server;
  std::signal(SIGINT, stop_serving);
  std::signal(SIGTERM, stop_serving);
  server.listen();
  serving = nullptr;
  return 0;
}
}  // namespace

const RegisterCommand register_serve(120, "serve", "results live in a browser: runs, studies, sweeps, curves",
                                     cmd_serve);

}  // namespace htm
