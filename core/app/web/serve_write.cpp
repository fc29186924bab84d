// htm serve's annotation routes (serve_write.h): the reads every server answers, the write gate
// (token and origin), a write's JSON body, and the writes, serialised on one read-write
// connection so that 50 pages writing at once queue here, not on SQLite's busy handler, and a
// training run waits at most for one short transaction of ours.
#include "web/serve_write.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include "htm/error.h"
#include "web/assets.h"
#include "web/page_text.h"
#include "web/serve.h"

namespace htm::serve {
namespace {

// Compares without an early exit (a wrong token's timing says little about the right one).
bool token_matches(const std::string& given, const std::string& token) {
  if (token.empty() || given.size() != token.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < token.size(); ++i) differ |= static_cast<unsigned char>(given[i] ^ token[i]);
  return differ == 0;
}

// ---- a flat JSON object, read by hand: the bodies are a few fields of text.
struct JsonReader {
  const std::string& s;
  size_t at = 0;
  [[noreturn]] void fail(const std::string& what) const {
    throw BadRequest("the body is not a flat JSON object: " + what + " at byte " + std::to_string(at));
  }
  void space() {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\n' || s[at] == '\r' || s[at] == '\t')) ++at;
  }
  void expect(char c) {
    space();
    if (at >= s.size() || s[at] != c) fail(std::string("expected '") + c + "'");
    ++at;
  }
  static void utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  uint32_t hex4() {
    if (at + 4 > s.size()) fail("a short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s[at++];
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                         : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                                         : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                                     : (fail("a bad \\u escape"), 0));
    }
    return v;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (at < s.size() && s[at] != '"') {
      const char c = s[at++];
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= s.size()) break;
      const char e = s[at++];
      static const std::string from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
      if (const size_t k = from.find(e); k != std::string::npos) {
        out += to[k];
      } else if (e == 'u') {
        uint32_t cp = hex4();
        if (cp >= 0xd800 && cp < 0xdc00 && s.compare(at, 2, "\\u") == 0) {  // a surrogate pair
          at += 2;
          const uint32_t low = hex4();
          if (low < 0xdc00 || low > 0xdfff) fail("a lone surrogate");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        } else if (cp >= 0xd800 && cp < 0xe000) {
          fail("a lone surrogate");
        }
        utf8(out, cp);
      } else {
        fail(std::string("an unknown escape \\") + e);
      }
    }
    if (at >= s.size()) fail("an unterminated string");
    ++at;
    return out;
  }
  // A value: a string, or true/false/null/a number as its text (null: nullopt as "\0null").
  std::pair<bool, std::string> value() {
    space();
    if (at < s.size() && s[at] == '"') return {true, string()};
    const size_t begin = at;
    while (at < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[at])) || s[at] == '-' || s[at] == '+' || s[at] == '.'))
      ++at;
    const std::string word = s.substr(begin, at - begin);
    if (word == "null") return {false, ""};
    static const std::regex number(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)");
    if (word == "true" || word == "false" || std::regex_match(word, number)) return {true, word};
    fail(word.empty() ? "expected a value (objects and arrays are not taken)" : "'" + word + "' is not a value");
  }
};

}  // namespace

std::map<std::string, std::string> json_fields(const std::string& body) {
  JsonReader r{body};
  std::map<std::string, std::string> fields;
  r.expect('{');
  r.space();
  if (r.at < body.size() && body[r.at] == '}') {
    ++r.at;
  } else {
    for (;;) {
      r.space();
      const std::string key = r.string();
      r.expect(':');
      auto [present, text] = r.value();
      if (fields.count(key)) r.fail("the field '" + key + "' twice");
      if (present) fields[key] = text;
      r.space();
      if (r.at < body.size() && body[r.at] == ',') {
        ++r.at;
        continue;
      }
      r.expect('}');
      break;
    }
  }
  r.space();
  if (r.at != body.size()) r.fail("something after the object");
  return fields;
}

bool write_path(const std::string& path) {
  static const std::regex writes(R"(/api/run/[^/]+/(note|tag|archive)|/api/views(/delete)?)");
  return std::regex_match(path, writes);
}

WriteCredentials write_credentials(const httplib::Request& req) {
  WriteCredentials c{req.get_header_value("Host"), req.get_header_value("Origin"),
                     req.get_header_value("Sec-Fetch-Site"), req.get_header_value("X-HTM-Token"), ""};
  const std::string auth = req.get_header_value("Authorization");
  if (c.header_token.empty() && auth.rfind("Bearer ", 0) == 0) c.header_token = auth.substr(7);
  const std::string cookies = "; " + req.get_header_value("Cookie");
  const size_t at = cookies.find("; htm_token=");
  if (at != std::string::npos) {
    const size_t begin = at + 12, end = cookies.find(';', begin);
    c.cookie_token = cookies.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  return c;
}

std::string write_refusal(const WriteCredentials& r, const std::string& token) {
  if (token.empty()) return "this server takes no writes without a token (htm serve --allow-writes --token T)";
  const bool own_origin =
      !r.host.empty() && !r.origin.empty() && (r.origin == "http://" + r.host || r.origin == "https://" + r.host);
  if (!r.origin.empty() && !own_origin)
    return "a write from another origin ('" + r.origin + "', this server is '" + r.host + "') is refused";
  if (!r.fetch_site.empty() && r.fetch_site != "same-origin" && r.fetch_site != "none")
    return "a write from another site (Sec-Fetch-Site: " + r.fetch_site + ") is refused";
  if (token_matches(r.header_token, token)) return "";
  if (token_matches(r.cookie_token, token))
    return own_origin ? "" : "a write that carries only the cookie needs an Origin header naming this server";
  return "a write needs the server's token: the X-HTM-Token header (or Authorization: Bearer), or the page's "
         "cookie (open a page once with ?token=...) with its Origin";
}

namespace {
std::string error_body(const std::string& text) { return "{\"error\":" + page::quote(text) + "}"; }
}  // namespace

httplib::Server::HandlerResponse write_gate(const httplib::Request& req, httplib::Response& res,
                                            const std::string& token) {
  const std::string refusal = write_refusal(write_credentials(req), token);
  if (refusal.empty()) return httplib::Server::HandlerResponse::Unhandled;
  res.status = 403;
  res.set_content(error_body(refusal), "application/json");
  return httplib::Server::HandlerResponse::Handled;
}

namespace {

struct NotJson : BadRequest {  // a write whose body is not declared JSON: 415
  using BadRequest::BadRequest;
};

std::string text_object(const std::map<std::string, std::string>& fields) {
  std::string out = "{";
  for (const auto& [k, v] : fields) out += (out.size() > 1 ? "," : "") + page::quote(k) + ":" + page::quote(v);
  return out + "}";
}

int64_t run_number(const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw BadRequest("run '" + text + "': expected a number");
}

void require_run(ResultsStore& read, int64_t id) {
  if (read.query("SELECT 1 FROM runs WHERE id = ?", {id}).rows.empty())
    throw NotFound("no run " + std::to_string(id) + " in this database");
}

std::string annotation_fields(const RunAnnotations& a) {
  return "\"note\":" + page::quote(a.note) + ",\"note_at\":" + (a.note_at > 0 ? page::number(a.note_at) : "null") +
         ",\"tags\":" + text_object(a.tags) + ",\"archived\":" + (a.archived ? "true" : "false");
}

// One run's annotations and its own tags (the tags table, read only here): what its page shows.
std::string run_annotations(ResultsStore& read, int64_t id, bool writes) {
  require_run(read, id);
  const auto found = read.annotations({id});
  std::map<std::string, std::string> own;
  for (const auto& row : read.query("SELECT key, value FROM tags WHERE run_id = ? ORDER BY key", {id}).rows)
    own[row[0]] = row[1];
  return "{\"run\":" + std::to_string(id) + ",\"writes\":" + (writes ? "true" : "false") + "," +
         annotation_fields(found.count(id) ? found.at(id) : RunAnnotations{}) + ",\"own_tags\":" + text_object(own) +
         "}";
}

// The annotations of the runs a page shows (?runs=3,7,12), and how many runs are archived in all.
std::string page_annotations(ResultsStore& read, const std::string& list, bool writes) {
  std::vector<int64_t> ids;
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    if (end > at) ids.push_back(run_number(list.substr(at, end - at)));
    at = end + 1;
  }
  if (ids.size() > 1000) throw BadRequest("runs=: at most 1000 runs at once, got " + std::to_string(ids.size()));
  std::string runs = "{";
  for (const auto& [id, a] : read.annotations(ids))
    runs += (runs.size() > 1 ? ",\"" : "\"") + std::to_string(id) + "\":{" + annotation_fields(a) + "}";
  const std::string archived =
      read.has_annotations() ? read.query("SELECT count(*) FROM run_archived WHERE archived = 1").rows[0][0] : "0";
  return "{\"writes\":" + std::string(writes ? "true" : "false") + ",\"runs\":" + runs +
         "},\"archived_total\":" + archived + "}";
}

std::string views(ResultsStore& read, bool writes) {
  std::string out = std::string("{\"writes\":") + (writes ? "true" : "false") + ",\"views\":[";
  bool first = true;
  for (const SavedView& v : read.saved_views()) {
    out += (first ? "{" : ",{") + std::string("\"name\":") + page::quote(v.name) +
           ",\"state\":" + page::quote(v.state) + ",\"updated_at\":" + page::number(v.updated_at) + "}";
    first = false;
  }
  return out + "]}";
}

// A field a write needs, else a 400 naming the body it expects.
std::string field(const std::map<std::string, std::string>& fields, const std::string& name, const std::string& shape) {
  auto it = fields.find(name);
  if (it == fields.end()) throw BadRequest("expected a JSON body " + shape + ": no '" + name + "'");
  return it->second;
}
bool flag(const std::map<std::string, std::string>& fields, const std::string& name, const std::string& shape) {
  const std::string v = field(fields, name, shape);
  if (v != "true" && v != "false") throw BadRequest("'" + name + "' is true or false, not " + v);
  return v == "true";
}
void check(const std::string& problem) {
  if (!problem.empty()) throw BadRequest(problem);
}

// A route's answer: JSON, with what went wrong as {"error"} and its status (a busy database: 503).
template <class F>
httplib::Server::Handler json_answer(F make) {
  return [make](const httplib::Request& req, httplib::Response& res) {
    try {
      res.set_content(make(req), "application/json");
      return;
    } catch (const NotFound& e) {
      res.status = 404;
      res.set_content(error_body(e.what()), "application/json");
    } catch (const NotJson& e) {
      res.status = 415;
      res.set_content(error_body(e.what()), "application/json");
    } catch (const BadRequest& e) {
      res.status = 400;
      res.set_content(error_body(e.what()), "application/json");
    } catch (const Error& e) {
      const std::string what = e.what();
      const bool busy = what.find("locked") != std::string::npos || what.find("busy") != std::string::npos;
      res.status = busy ? 503 : 500;
      res.set_content(error_body(busy ? "the database stayed busy for " + std::to_string(kWriteBusyTimeoutMs / 1000) +
                                            " s (a writer held it); nothing was written, try again"
                                      : what),
                      "application/json");
    }
  };
}

// The one read-write connection of the writes, taken one write at a time.
struct Writer {
  std::mutex mutex;
  ResultsStore store;
  explicit Writer(const std::string& db) : store(db) { store.set_busy_timeout(kWriteBusyTimeoutMs); }
};

}  // namespace

void add_annotation_routes(httplib::Server& http, std::function<ResultsStore&()> read, const ServeOptions& options) {
  const bool writes = options.allow_writes;
  if (writes && options.token.empty())
    throw Error(
        "htm serve --allow-writes needs --token: every write must carry the secret (on a shared machine any "
        "user could otherwise write to the results from the loopback)");
  http.Get(R"(/api/run/([^/]+)/notes)", json_answer([read, writes](const httplib::Request& req) {
             return run_annotations(read(), run_number(req.matches[1].str()), writes);
           }));
  http.Get("/api/annotations", json_answer([read, writes](const httplib::Request& req) {
             return page_annotations(read(), req.get_param_value("runs"), writes);
           }));
  http.Get("/api/views", json_answer([read, writes](const httplib::Request&) { return views(read(), writes); }));
  http.Get("/static/notes.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(assets::notes_js, "text/javascript");
  });
  if (!writes) return;

  http.set_payload_max_length(std::max(options.max_request_bytes, kWriteBodyBytes));  // the guard limits the rest
  auto writer = std::make_shared<Writer>(options.db);
  // A write: its JSON body read, `write` run under the writer's lock (false: the run is not there).
  auto post = [&http, writer](const std::string& pattern, auto write, auto answer) {
    http.Post(pattern, json_answer([writer, write, answer](const httplib::Request& req) {
                if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0)
                  throw NotJson("a write's body is JSON (Content-Type: application/json), not '" +
                                req.get_header_value("Content-Type") + "'");
                const auto fields = json_fields(req.body);
                bool done = false;
                {
                  std::lock_guard<std::mutex> lock(writer->mutex);
                  done = write(writer->store, req, fields);
                }
                return answer(req, done);
              }));
  };
  auto run_answer = [read](const httplib::Request& req, bool done) {
    const int64_t id = run_number(req.matches[1].str());
    if (!done) throw NotFound("no run " + std::to_string(id) + " in this database");
    return run_annotations(read(), id, true);
  };
  post(R"(/api/run/([^/]+)/note)",
       [](ResultsStore& store, const httplib::Request& req, const std::map<std::string, std::string>& f) {
         const std::string text = field(f, "text", "{\"text\": \"...\"}");
         check(note_problem(text));
         return store.set_note(run_number(req.matches[1].str()), text);
       },
       run_answer);
  post(R"(/api/run/([^/]+)/tag)",
       [](ResultsStore& store, const httplib::Request& req, const std::map<std::string, std::string>& f) {
         const std::string shape = "{\"key\": \"k\", \"value\": \"v\"} or {\"key\": \"k\", \"remove\": true}";
         const std::string key = field(f, "key", shape);
         check(tag_key_problem(key));
         const int64_t id = run_number(req.matches[1].str());
         if (f.count("remove") && flag(f, "remove", shape)) return store.remove_user_tag(id, key);
         const std::string value = field(f, "value", shape);
         check(tag_value_problem(value));
         return store.set_user_tag(id, key, value);
       },
       run_answer);
  post(R"(/api/run/([^/]+)/archive)",
       [](ResultsStore& store, const httplib::Request& req, const std::map<std::string, std::string>& f) {
         return store.set_archived(run_number(req.matches[1].str()), flag(f, "archived", "{\"archived\": true}"));
       },
       run_answer);
  auto views_answer = [read](const httplib::Request&, bool done) {
    if (!done) throw NotFound("no saved view of that name");
    return views(read(), true);
  };
  post(
      "/api/views",
      [](ResultsStore& store, const httplib::Request&, const std::map<std::string, std::string>& f) {
        const std::string shape = "{\"name\": \"...\", \"state\": \"experiment=...&sort=...\"}";
        const std::string name = field(f, "name", shape), state = field(f, "state", shape);
        check(view_name_problem(name));
        check(view_state_problem(state));
        store.save_view(name, state);
        return true;
      },
      views_answer);
  post(
      "/api/views/delete",
      [](ResultsStore& store, const httplib::Request&, const std::map<std::string, std::string>& f) {
        return store.delete_view(field(f, "name", "{\"name\": \"...\"}"));
      },
      views_answer);
}

}  // namespace htm::serve
