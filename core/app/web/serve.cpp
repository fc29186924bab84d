// `htm serve`: the HTTP side. cpp-httplib (Debian's libcpp-httplib-dev) behind a front door
// (serve_gate.h): a connection waits, without a worker, until its request head has arrived
// (closed after header_timeout_s), each client address holds at most client_connections, and a
// pool worker then serves the one request; each worker thread keeps its own read-only
// connection to the database (a SQLite connection is not shared between threads), opened on its
// first request. Safety, in the order a request meets it after that: the pre-routing handler
// refuses every method but GET and HEAD (with --allow-writes, a write's POST: serve_write.h),
// a Host header that does not name the loopback address the server listens on (DNS
// rebinding), and a request without the token when one is set; the library refuses a body
// over max_request_bytes (413) and drops a client slower than timeout_s.
#include "web/serve.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>

#include <httplib.h>
#include <zlib.h>
#include <boost/program_options.hpp>

#include "commands/commands.h"
#include "web/assets.h"
#include "web/page_text.h"
#include "web/report.h"
#include "web/serve_gate.h"
#include "web/serve_write.h"

namespace po = boost::program_options;

namespace htm {
namespace {

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

// Compares without an early exit, so a wrong token's timing says little about the right one.
bool same_secret(const std::string& given, const std::string& secret) {
  if (secret.empty() || given.size() != secret.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < secret.size(); ++i) differ |= static_cast<unsigned char>(given[i] ^ secret[i]);
  return differ == 0;
}

std::string cookie(const httplib::Request& req, const std::string& name) {
  const std::string header = req.get_header_value("Cookie");
  for (size_t at = 0; at < header.size();) {
    size_t end = header.find(';', at);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(at, end - at);
    part.erase(0, part.find_first_not_of(' '));
    if (part.rfind(name + "=", 0) == 0) return part.substr(name.size() + 1);
    at = end + 1;
  }
  return "";
}

std::string mime_type(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".txt" || ext == ".log" || ext == ".toml") return "text/plain; charset=utf-8";
  if (ext == ".csv") return "text/csv; charset=utf-8";
  if (ext == ".json") return "application/json";
  return "application/octet-stream";
}

std::string error_json(const std::string& text) { return "{\"error\":" + page::quote(text) + "}"; }

// `text` gzip-compressed (zlib, level 6); empty if zlib fails.
std::string gzip(const std::string& text) {
  z_stream z{};
  // Level 1: a run's series (530 KB of JSON) in 8 ms, where level 6 took 35 ms for 7 % fewer bytes.
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const bool done = deflate(&z, Z_FINISH) == Z_STREAM_END;
  out.resize(z.total_out);
  deflateEnd(&z);
  return done ? out : "";
}

// A page, a script or JSON, gzip-compressed here when the client takes gzip. Left to the library,
// a browser's "br" gets brotli at its slowest quality: 2.3 s to compress a 1 MB study page, where
// gzip takes milliseconds. A content provider with a length is sent as given, not compressed again.
void reply(const httplib::Request& req, httplib::Response& res, std::string body, const std::string& type) {
  res.set_header("Vary", "Accept-Encoding");
  std::string zipped;
  if (body.size() >= 1024 && req.get_header_value("Accept-Encoding").find("gzip") != std::string::npos)
    zipped = gzip(body);
  if (zipped.empty()) return res.set_content(std::move(body), type);
  auto shared = std::make_shared<std::string>(std::move(zipped));
  res.set_header("Content-Encoding", "gzip");
  res.set_content_provider(shared->size(), type, [shared](size_t offset, size_t length, httplib::DataSink& sink) {
    return sink.write(shared->data() + offset, length);
  });
}

// A request refused: a page (what was wrong, and the way back to the runs) where a page was asked
// for, JSON for /api/ and the files (/artifact/, /static/).
void refuse(const httplib::Request& req, httplib::Response& res, int status, const std::string& text) {
  res.status = status;
  const bool page =
      req.path.rfind("/api/", 0) != 0 && req.path.rfind("/artifact/", 0) != 0 && req.path.rfind("/static/", 0) != 0;
  if (!page) return res.set_content(error_json(text), "application/json");
  const std::string title = status == 404 ? "not found" : status == 400 ? "bad request" : "refused";
  const std::string id = status == 404 ? "not-found" : "refused";
  res.set_content("<!doctype html><meta charset=\"utf-8\"><title>htm serve: " + title + "</title><h1>" + title + " (" +
                      std::to_string(status) + ")</h1><p id=\"" + id + "\">" + page::escape_html(text) +
                      "</p><p><a href=\"/\">all runs</a></p>",
                  "text/html; charset=utf-8");
}

// A number in a route's path (a run id), else a 400 naming what came.
int64_t path_id(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw BadRequest(what + " '" + text + "': expected a number");
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

struct Server::Impl {
  ServeOptions options;
  GatedServer http;
  std::string chart_js;
  int port = 0;
  std::set<std::string> hosts;  // Host headers accepted on a loopback address
  ArtifactTrust trust;          // which runs' folders files are served from: marked ones, --artifacts

  explicit Impl(ServeOptions o)
      : options(std::move(o)),
        http(static_cast<size_t>(options.threads),
             std::chrono::milliseconds(static_cast<int64_t>(options.header_timeout_s * 1000)),
             static_cast<size_t>(options.client_connections)),
        trust(options.artifact_roots) {}

  // This thread's read-only connection to the database, opened on its first request.
  ResultsStore& store() {
    thread_local std::map<std::string, std::unique_ptr<ResultsStore>> stores;
    auto& slot = stores[options.db];
    if (!slot) slot = std::make_unique<ResultsStore>(options.db, OpenMode::read_only);
    return *slot;
  }

  httplib::Server::HandlerResponse guard(const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-store");
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
                   "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'");
    const bool write = options.allow_writes && req.method == "POST" && serve::write_path(req.path);
    if (req.method != "GET" && req.method != "HEAD" && !write) {
      res.set_header("Allow", "GET, HEAD");
      refuse(req, res, 405, "htm serve only reads: " + req.method + " is not allowed");
      return httplib::Server::HandlerResponse::Handled;
    }
    // The library reads no body of a GET: a request that announces one over the limit is
    // refused before anything reads it, and the connection closed.
    const std::string length = req.get_header_value("Content-Length");
    const size_t most = write ? serve::kWriteBodyBytes : options.max_request_bytes;
    const bool too_long = !length.empty() && (length.find_first_not_of("0123456789") != std::string::npos ||
                                              length.size() > 12 || std::stoull(length) > most);
    if (too_long || req.has_header("Transfer-Encoding")) {
      res.set_header("Connection", "close");
      refuse(req, res, 413, "request too large: htm serve takes at most " + std::to_string(most) + " bytes of body");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (loopback(options.host) && hosts.count(req.get_header_value("Host")) == 0) {
      refuse(req, res, 403,
             "Host '" + req.get_header_value("Host") +
                 "' is not this server's loopback address (DNS rebinding is refused)");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (write) return serve::write_gate(req, res, options.token);  // token and origin (CSRF): 403 or on
    if (!options.token.empty()) {
      std::string given;
      const std::string auth = req.get_header_value("Authorization");
      if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
      if (given.empty()) given = req.get_param_value("token");
      if (given.empty()) given = cookie(req, "htm_token");
      if (!same_secret(given, options.token)) {
        refuse(req, res, 401,
               "this server needs its token: open a page once with ?token=... or send Authorization: Bearer ...");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (req.has_param("token"))  // remembered for the page's own requests
        res.set_header("Set-Cookie", "htm_token=" + options.token + "; HttpOnly; SameSite=Strict; Path=/");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  }

  // A JSON route (type application/json) or a page (text/html): what is not there is 404, other
  // errors in the request 400, with their text (as a page for a page); anything else 500.
  template <class F>
  void route(const std::string& pattern, F&& make, const std::string& type = "application/json") {
    http.Get(pattern, [make, type](const httplib::Request& req, httplib::Response& res) {
      try {
        reply(req, res, make(req), type);
      } catch (const NotFound& e) {
        refuse(req, res, 404, e.what());
      } catch (const BadRequest& e) {
        refuse(req, res, 400, e.what());
      }
    });
  }
  template <class F>
  void json_route(const std::string& pattern, F&& make) {
    route(pattern, std::forward<F>(make));
  }
  template <class F>
  void page_route(const std::string& pattern, F&& make) {
    route(pattern, std::forward<F>(make), "text/html; charset=utf-8");
  }

  void routes() {
    page_route("/", [](const httplib::Request&) { return serve::runs_page(); });
    http.Get("/static/chart.js", [this](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Cache-Control", "max-age=3600");
      reply(req, res, chart_js, "text/javascript");
    });
    http.Get("/static/pictures.js", [](const httplib::Request& req, httplib::Response& res) {
      reply(req, res, assets::pictures_js, "text/javascript");  // the run and compare pages' pictures
    });
    json_route("/api/runs", [this](const httplib::Request& req) {
      serve::RunsQuery q;
      for (auto [name, text] : {std::pair{"experiment", &q.experiment}, {"status", &q.status}, {"group", &q.group}})
        *text = req.get_param_value(name);
      for (auto [name, list] : {std::pair{"where", &q.where}, {"column", &q.columns}, {"chart", &q.chart}})
        for (size_t i = 0; i < req.get_param_value_count(name); ++i) list->push_back(req.get_param_value(name, i));
      if (req.has_param("sort")) q.sort = req.get_param_value("sort");
      q.descending = req.get_param_value("order") != "asc";
      q.page = integer(req, "page", 0);
      q.size = integer(req, "size", 50);
      q.archived = req.get_param_value("archived") == "1";
      return serve::runs_json(store(), q);
    });
    page_route(R"(/run/([^/]+))", [this](const httplib::Request& req) {
      const int64_t id = path_id(req.matches[1].str(), "run");
      if (store().query("SELECT 1 FROM runs WHERE id = ?", {id}).rows.empty())
        throw NotFound("There is no run " + std::to_string(id) + " in " + options.db + ".");
      return serve::run_page(id);
    });
    page_route("/compare", [](const httplib::Request&) { return serve::compare_page(); });
    json_route(R"(/api/run/([^/]+))", [this](const httplib::Request& req) {
      const serve::SeriesQuery series = series_query(req);  // ?points=N: the series thinned, not the rows
      return serve::run_json(store(), path_id(req.matches[1].str(), "run"), integer(req, "after", 0),
                             integer(req, "limit", 20000), trust, req.has_param("points") ? &series : nullptr);
    });
    json_route(R"(/api/run/([^/]+)/series)", [this](const httplib::Request& req) {
      return serve::series_json(store(), path_id(req.matches[1].str(), "run"), series_query(req));
    });
    page_route(R"(/study/([^/]+))", [this](const httplib::Request& req) {
      ReportRequest request = study_request(req);
      request.curves = ReportCurves::main;  // the page asks for the other curves once these are drawn
      serve::require_study(store(), request.experiment);
      std::string data;
      try {
        data = report_data(store(), request);
      } catch (const Error& e) {  // a page was asked for: a page says what is missing
        throw NotFound(e.what());
      }
      const std::string live = page::script("const LIVE = '/api/study/' + encodeURIComponent(" +
                                            page::quote(request.experiment) + ");\n" + assets::live_js);
      return report_page(data, "<script src=\"/static/chart.js\"></script>", "htm serve: " + request.experiment, live);
    });
    json_route(R"(/api/study/([^/]+)/version)",
               [this](const httplib::Request& req) { return serve::study_version(store(), req.matches[1].str()); });
    json_route(R"(/api/study/([^/]+)/finals)", [this](const httplib::Request& req) { return study(req, true); });
    json_route(R"(/api/study/([^/]+)/curves)", [this](const httplib::Request& req) {
      return study(req, false, ReportCurves::rest);  // the curves a study page names but left out
    });
    json_route(R"(/api/study/([^/]+))", [this](const httplib::Request& req) { return study(req, false); });
    page_route(R"(/sweep/([^/]+))", [this](const httplib::Request& req) {
      serve::require_study(store(), req.matches[1].str());
      return serve::sweep_page(req.matches[1].str());
    });
    json_route(R"(/api/sweep/([^/]+))", [this](const httplib::Request& req) {
      const std::string metric = req.has_param("metric") ? req.get_param_value("metric") : "test/mse";
      const std::string phase = req.has_param("phase") ? req.get_param_value("phase") : "explore";
      return serve::sweep_json(store(), req.matches[1].str(), metric, phase);
    });
    // A file of a run's folder: 403 with why when the folder is not one htm may read (no marker
    // above it, not under --artifacts), 404 with why when the run, its folder or the file is not there.
    http.Get(R"(/artifact/([^/]+)/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      int64_t id = 0;
      try {
        id = path_id(req.matches[1].str(), "run");
      } catch (const BadRequest& e) {
        return refuse(req, res, 400, e.what());
      }
      if (store().query("SELECT 1 FROM runs WHERE id = ?", {id}).rows.empty())
        return refuse(req, res, 404, "no run " + std::to_string(id) + " in this database");
      const ArtifactPath file = serve::artifact_path(store(), id, req.matches[2].str(), trust);
      if (!file) {
        const bool untrusted = file.verdict == ArtifactPath::Verdict::untrusted;
        return refuse(req, res, untrusted ? 403 : 404, file.refusal + (untrusted ? "; not served" : ""));
      }
      res.set_content(read_whole(file.path), mime_type(file.path));
    });
    serve::add_annotation_routes(
        http, [this]() -> ResultsStore& { return store(); }, options);  // serve_write.h
  }

  // What a study's page or JSON asks for: the study, its reference variant (?reference=), pictures
  // by their /artifact/ route, never inlined.
  ReportRequest study_request(const httplib::Request& req) const {
    ReportRequest request;
    request.experiment = req.matches[1].str();
    request.reference = req.get_param_value("reference");
    request.inline_pictures = false;
    request.artifact_roots = options.artifact_roots;
    return request;
  }

  // A study's report_data (finals_only: its final-values panel; ?curves=main: the page's first
  // curves, the others by name); an unknown study is a 404.
  std::string study(const httplib::Request& req, bool finals_only, ReportCurves curves = ReportCurves::all) {
    ReportRequest request = study_request(req);
    request.finals_only = finals_only;
    const std::string asked = req.get_param_value("curves");
    if (curves == ReportCurves::all && asked == "main")
      curves = ReportCurves::main;
    else if (curves == ReportCurves::all && !asked.empty() && asked != "all")
      throw BadRequest("curves=" + asked + ": expected main or all");
    request.curves = curves;
    serve::require_study(store(), request.experiment);
    try {
      return report_data(store(), request);
    } catch (const Error& e) {
      throw BadRequest(e.what());
    }
  }

  // ?points=N&from=STEP&to=STEP&smooth=W&raw=0 (docs/serve.md).
  static serve::SeriesQuery series_query(const httplib::Request& req) {
    serve::SeriesQuery q;
    q.points = std::max<int64_t>(0, integer(req, "points", 0));
    q.from = integer(req, "from", q.from);
    q.to = integer(req, "to", q.to);
    q.raw = req.get_param_value("raw") != "0";
    const std::string smooth = req.get_param_value("smooth");
    char* end = nullptr;
    q.smooth = smooth.empty() ? 0 : std::strtod(smooth.c_str(), &end);
    if (!smooth.empty() && (*end != 0 || !(q.smooth >= 0 && q.smooth < 1)))
      throw BadRequest("smooth=" + smooth + ": expected a number from 0 to 0.99");
    return q;
  }
  static int64_t integer(const httplib::Request& req, const std::string& name, int64_t fallback) {
    if (!req.has_param(name)) return fallback;
    const std::string text = req.get_param_value(name);
    try {
      size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used == text.size()) return v;
    } catch (const std::exception&) {
    }
    throw BadRequest(name + "=" + text + ": expected an integer");
  }
};

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  if (!loopback(s.options.host) && s.options.token.empty())
    throw Error("htm serve --host " + s.options.host +
                ": any address but the loopback needs --token (anyone who reaches the port could read the results)");
  s.chart_js = chart_js_source(s.options.chart_js);
  { ResultsStore check(s.options.db, OpenMode::read_only); }   // a clear error now, not on the first request
  s.http.set_payload_max_length(s.options.max_request_bytes);  // a write's larger body: serve_write.cpp
  s.http.set_read_timeout(s.options.timeout_s, 0);
  s.http.set_write_timeout(s.options.timeout_s, 0);
  s.http.set_pre_routing_handler(
      [&s](const httplib::Request& req, httplib::Response& res) { return s.guard(req, res); });
  s.http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    refuse(req, res, 500, what);
  });
  // What no route answers (/nope, /run/1/x), and any other error the library makes without a body.
  s.http.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // said already
        refuse(req, res, res.status,
               res.status == 404 ? "nothing at '" + req.path + "' (the runs page links what is)"
                                 : "the server could not answer '" + req.path + "'");
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.routes();
  s.port = s.options.port == 0 ? s.http.bind_to_any_port(s.options.host)
                               : (s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
  s.http.widen_backlog();
  if (s.port <= 0)
    throw Error("htm serve: cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                " (in use, or not an address of this machine)");
  const std::string port = ":" + std::to_string(s.port);
  for (const char* name : {"127.0.0.1", "localhost", "[::1]"}) s.hosts.insert(name + port);
  if (s.port == 80)
    for (const char* name : {"127.0.0.1", "localhost", "[::1]"}) s.hosts.insert(name);
}

Server::~Server() { stop(); }
int Server::port() const { return impl_->port; }
void Server::listen() { impl_->http.listen_after_bind(); }
void Server::stop() {
  if (impl_->http.is_running()) impl_->http.stop();
}

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

}  // namespace

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
const RegisterCommand register_serve(120, "serve", "results live in a browser: runs, studies, sweeps, curves",
                                     cmd_serve);

}  // namespace htm
