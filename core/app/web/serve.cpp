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

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>

#include <httplib.h>
#include <zlib.h>

#include "web/assets.h"
#include "web/page_text.h"
#include "web/report.h"
#include "web/serve_gate.h"
#include "web/serve_pages.h"
#include "web/serve_write.h"

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
    // The pages and the JSON routes their scripts read: a row each (serve_pages.h).
    for (const serve::PageRow& row : serve::page_rows()) {
      page_route(row.route, [this, &row](const httplib::Request& req) {
        serve::RouteContext context{store(), options, trust};
        return serve::page_html(row, context, req);
      });
      for (const serve::JsonRoute& json : row.json)
        json_route(json.route, [this, &json](const httplib::Request& req) {
          serve::RouteContext context{store(), options, trust};
          return json.json(context, req);
        });
    }
    http.Get("/static/chart.js", [this](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Cache-Control", "max-age=3600");
      reply(req, res, chart_js, "text/javascript");
    });
    http.Get("/static/pictures.js", [](const httplib::Request& req, httplib::Response& res) {
      reply(req, res, assets::pictures_js, "text/javascript");  // the run and compare pages' pictures
    });
    // A file of a run's folder: 403 with why when the folder is not one htm may read (no marker
    // above it, not under --artifacts), 404 with why when the run, its folder or the file is not there.
    http.Get(R"(/artifact/([^/]+)/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      int64_t id = 0;
      try {
        id = serve::path_id(req.matches[1].str(), "run");
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

}  // namespace htm
