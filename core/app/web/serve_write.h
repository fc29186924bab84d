// htm serve's annotations: what a reader adds to runs from the pages (a note, tags of their own,
// an archived flag) and the runs table's saved views (store/annotations.h holds the tables).
// Every server reads them; only one started with --allow-writes (and a --token) takes writes:
// a POST of a JSON object, its token in a header or the page's same-site cookie, from the
// server's own origin, written in one short transaction on a read-write connection of its own
// (the pages' reads stay on their read-only ones). docs/serve.md, "Writing from the page".
#pragma once

#include <httplib.h>

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "store/results_store.h"
#include "web/serve.h"

namespace htm::serve {

inline constexpr size_t kWriteBodyBytes = 65536;  ///< a write's JSON body (a note is at most 16 KiB)
inline constexpr int kWriteBusyTimeoutMs = 5000;  ///< a write waits this long for a training run's lock

/// Whether a POST to `path` is one of the writes (the server refuses every other POST).
bool write_path(const std::string& path);

/// What a write request shows of where it comes from and who sends it.
struct WriteCredentials {
  std::string host;          ///< the Host header
  std::string origin;        ///< the Origin header; "" when none was sent (not a browser)
  std::string fetch_site;    ///< Sec-Fetch-Site; "" when none was sent
  std::string header_token;  ///< X-HTM-Token, or Authorization: Bearer
  std::string cookie_token;  ///< the htm_token cookie (set by ?token=, HttpOnly, SameSite=Strict)
};
/// What `req` shows (its Host, Origin, Sec-Fetch-Site, X-HTM-Token or Bearer token, cookie).
WriteCredentials write_credentials(const httplib::Request& req);
/// Why a write is refused (HTTP 403), or "" to let it through: it needs the server's token in a
/// header, or in the cookie with an Origin header naming this server (a browser's own request);
/// an Origin or Sec-Fetch-Site that names another site is refused whatever the token.
std::string write_refusal(const WriteCredentials& request, const std::string& token);

/// The pre-routing check of a write: answers 403 with why (JSON) and Handled when write_refusal()
/// refuses `req`, else Unhandled (the write's route then runs).
httplib::Server::HandlerResponse write_gate(const httplib::Request& req, httplib::Response& res,
                                            const std::string& token);

/// The fields of a flat JSON object ({"text": "...", "archived": true}): strings as they are,
/// true/false/numbers as their text, null as absent. Throws BadRequest naming what is wrong.
std::map<std::string, std::string> json_fields(const std::string& body);

/// Registers the annotation routes on `http`: GET /api/run/ID/notes, /api/annotations?runs=,
/// /api/views and the pages' script /static/notes.js on every server, with `read` the thread's
/// read-only store; with options.allow_writes, also the POSTs, which write to options.db through
/// one read-write connection of their own, opened here. Throws htm::Error when writes are asked
/// for without a token, or the file cannot be written.
void add_annotation_routes(httplib::Server& http, std::function<ResultsStore&()> read, const ServeOptions& options);

}  // namespace htm::serve
