// What a reader adds to runs from htm serve's pages (store/annotations.h, web/serve_write.h): the
// tables beside the run's own tags, what the store refuses, what htm merge carries, and the live
// server's writes: only with --allow-writes and its token, never from another origin, bad input
// answered with one line and its status, and 50 writers at once losing nothing.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "serve_fixture.h"
#include "web/serve_write.h"

namespace htm {
namespace {

std::string count_of(const std::string& path, const std::string& table) {
  ResultsStore store(path, OpenMode::read_only);
  return store.query("SELECT count(*) FROM " + table).rows[0][0];
}

// ---- the store

TEST_F(ServeTest, ServeWriteAnnotationsLiveBesideTheRunsOwnTags) {
  ResultsStore store(db_path());
  const int64_t run = ids_[0];
  store.set_tags(run, {{"note", "from htm run"}, {"phase", "explore"}});
  EXPECT_TRUE(store.set_note(run, "lr too high\nsee run 3"));
  EXPECT_TRUE(store.set_user_tag(run, "phase", "mine"));  // a key the run has itself: its own stays
  EXPECT_TRUE(store.set_user_tag(run, "owner", "ana"));
  EXPECT_TRUE(store.set_archived(run, true));
  EXPECT_EQ(single(store, "SELECT value FROM tags WHERE run_id = " + std::to_string(run) + " AND key = 'phase'"),
            "explore");
  EXPECT_EQ(single(store, "SELECT value FROM tags WHERE run_id = " + std::to_string(run) + " AND key = 'note'"),
            "from htm run");
  const auto found = store.annotations({run, ids_[1]});
  ASSERT_EQ(found.size(), 1u);  // the other run has none
  const RunAnnotations& a = found.at(run);
  EXPECT_EQ(a.note, "lr too high\nsee run 3");
  EXPECT_GT(a.note_at, 1.7e9);
  EXPECT_EQ(a.tags, (std::map<std::string, std::string>{{"owner", "ana"}, {"phase", "mine"}}));
  EXPECT_TRUE(a.archived);
  EXPECT_TRUE(store.remove_user_tag(run, "owner"));
  EXPECT_EQ(store.annotations({run}).at(run).tags.size(), 1u);
  EXPECT_FALSE(store.set_note(99999, "x"));  // no such run: nothing written
  EXPECT_EQ(single(store, "SELECT count(*) FROM run_notes"), "1");
  EXPECT_NE(error_of([&] { store.set_user_tag(run, "a b", "x"); }).find("only letters, digits"), std::string::npos);
  EXPECT_NE(error_of([&] { store.set_note(run, std::string(kNoteMaxBytes + 1, 'x')); }).find("at most 16384"),
            std::string::npos);
  EXPECT_NE(error_of([&] { store.set_note(run, "bad \xff byte"); }).find("not UTF-8"), std::string::npos);
  EXPECT_NE(error_of([&] { store.save_view("v", "sel=1&token=secret"); }).find("token"), std::string::npos);
  store.save_view("mine", "experiment=sweep&sel=1,2");
  store.save_view("mine", "experiment=other");  // replaced
  ASSERT_EQ(store.saved_views().size(), 1u);
  EXPECT_EQ(store.saved_views()[0].state, "experiment=other");
  EXPECT_TRUE(store.delete_view("mine"));
  EXPECT_FALSE(store.delete_view("mine"));
  // The metrics and settings are as they were.
  EXPECT_EQ(single(store, "SELECT count(*) FROM metrics WHERE run_id = " + std::to_string(run)), "2");
}

TEST_F(ServeTest, ServeWriteAFileWithoutTheTablesReadsAsNone) {
  {
    ResultsStore store(db_path());
    store.query("DROP TABLE run_notes", {}, true);  // a file no read-write open of this htm touched
  }
  ResultsStore read(db_path(), OpenMode::read_only);
  EXPECT_FALSE(read.has_annotations());
  EXPECT_TRUE(read.annotations({ids_[0]}).empty());
  EXPECT_TRUE(read.saved_views().empty());
}

TEST_F(ServeTest, MergeCarriesAnnotationsByUuidTheLaterWins) {
  const std::string other = db_path("other.sqlite");
  int64_t source_run = 0;
  {
    ResultsStore source(other);
    RunInfo info = make_run("a", 5);
    info.experiment = "shard";
    source_run = source.begin_run(info);
    source.finish_run(source_run, RunStatus::finished);
    source.set_note(source_run, "from the shard");
    source.set_user_tag(source_run, "owner", "ana");
    source.set_archived(source_run, true);
    source.save_view("shard view", "experiment=shard");
  }
  ResultsStore target(db_path());
  EXPECT_EQ(target.merge_from(other), 1);
  const std::string merged = single(target,
                                    "SELECT r.id FROM runs r JOIN experiments e ON e.id = r.experiment_id "
                                    "WHERE e.name = 'shard'");
  const int64_t id = std::stoll(merged);
  ASSERT_EQ(target.annotations({id}).count(id), 1u);
  EXPECT_EQ(target.annotations({id}).at(id).note, "from the shard");
  EXPECT_EQ(target.annotations({id}).at(id).tags.at("owner"), "ana");
  EXPECT_TRUE(target.annotations({id}).at(id).archived);
  ASSERT_EQ(target.saved_views().size(), 1u);
  EXPECT_EQ(target.saved_views()[0].name, "shard view");
  // Annotated again on both sides: a run already here takes the later note, keeps its own later flag.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  target.set_archived(id, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {
    ResultsStore source(other);
    source.set_note(source_run, "edited in the shard");
  }
  EXPECT_EQ(target.merge_from(other), 0);  // no new run, but the annotations come
  EXPECT_EQ(target.annotations({id}).at(id).note, "edited in the shard");
  EXPECT_FALSE(target.annotations({id}).at(id).archived);  // unarchived here after the shard archived it
  EXPECT_EQ(single(target, "SELECT count(*) FROM run_user_tags"), "1");
  {  // a shard without the tables (an older htm's) merges as before
    ResultsStore old(db_path("old.sqlite"));
    RunInfo info = make_run("b", 6);
    info.experiment = "old";
    old.finish_run(old.begin_run(info), RunStatus::finished);
    old.query("DROP TABLE run_notes", {}, true);
    old.query("DROP TABLE saved_views", {}, true);
  }
  EXPECT_EQ(target.merge_from(db_path("old.sqlite")), 1);
}

// ---- the body of a write

TEST(ServeWrite, JsonFieldsReadsAFlatObject) {
  const auto f =
      serve::json_fields(R"( {"text": "a\"b\\c\n\u00e9\ud83d\ude00", "archived": true, "n": -1.5e3, "x": null} )");
  EXPECT_EQ(f.at("text"), "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(f.at("archived"), "true");
  EXPECT_EQ(f.at("n"), "-1.5e3");
  EXPECT_EQ(f.count("x"), 0u);
  EXPECT_TRUE(serve::json_fields("{}").empty());
  for (const char* bad : {"", "[]", "{\"a\": {}}", "{\"a\": [1]}", "{\"a\": 1,}", "{\"a\" 1}", "{\"a\": \"x}",
                          "{\"a\": 1} x", "{\"a\": 1, \"a\": 2}", "{\"a\": \"\\ud800\"}", "{\"a\": tru}"})
    EXPECT_THROW(serve::json_fields(bad), BadRequest) << bad;
}

TEST(ServeWrite, TheGateNeedsTheTokenFromThisOrigin) {
  const std::string token = "s3cret", host = "127.0.0.1:8080";
  auto refused = [&](serve::WriteCredentials c) { return !serve::write_refusal(c, token).empty(); };
  EXPECT_FALSE(refused({host, "", "", token, ""}));                           // a script's header
  EXPECT_FALSE(refused({host, "http://" + host, "same-origin", "", token}));  // the page: cookie and its origin
  EXPECT_TRUE(refused({host, "", "", "", ""}));                               // nothing
  EXPECT_TRUE(refused({host, "", "", "s3creT", ""}));                         // a wrong token
  EXPECT_TRUE(refused({host, "", "", "", token}));                            // the cookie without an Origin
  EXPECT_TRUE(refused({host, "http://evil.example", "", token, ""}));         // another origin, even with the token
  EXPECT_TRUE(refused({host, "http://evil.example", "cross-site", "", token}));
  EXPECT_TRUE(refused({host, "http://" + host, "cross-site", "", token}));
  EXPECT_TRUE(refused({host, "null", "", token, ""}));
  EXPECT_FALSE(serve::write_refusal({host, "", "", "", ""}, "").empty());  // no token set: no writes at all
  EXPECT_TRUE(serve::write_path("/api/run/3/note"));
  EXPECT_TRUE(serve::write_path("/api/views/delete"));
  EXPECT_FALSE(serve::write_path("/api/runs"));
  EXPECT_FALSE(serve::write_path("/api/run/3"));
}

// ---- the live server

class WriteServer : public ServeTest {
 protected:
  void start(bool writes, const std::string& token = "s3cret") {
    ServeOptions options;
    options.db = db_path();
    options.port = 0;
    options.timeout_s = 2;
    options.header_timeout_s = 1;
    options.token = token;
    options.allow_writes = writes;
    server_ = std::make_unique<Server>(options);
    thread_ = std::thread([this] { server_->listen(); });
    for (int i = 0; i < 200; ++i) {
      if (client().Get("/api/views", {{"X-HTM-Token", "s3cret"}, {"Authorization", "Bearer s3cret"}})) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    ServeTest::TearDown();
  }
  httplib::Client client() const { return httplib::Client("127.0.0.1", server_->port()); }
  httplib::Result post(const std::string& path, const std::string& body,
                       httplib::Headers headers = {{"X-HTM-Token", "s3cret"}}) {
    return client().Post(path.c_str(), headers, body, "application/json");
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  std::string annotation_rows() const {
    return count_of(db_path(), "run_notes") + count_of(db_path(), "run_user_tags") +
           count_of(db_path(), "run_archived") + count_of(db_path(), "saved_views");
  }

  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(WriteServer, ServeWriteOnlyWithTheOptionAndAToken) {
  ServeOptions options;
  options.db = db_path();
  options.port = 0;
  options.allow_writes = true;
  EXPECT_THROW(Server{options}, Error);  // --allow-writes without --token
  start(false);
  auto refused = post("/api/run/" + std::to_string(ids_[0]) + "/note", R"({"text": "x"})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 405);
  auto read = client().Get(("/api/run/" + std::to_string(ids_[0]) + "/notes").c_str(),
                           {{"X-HTM-Token", "s3cret"}, {"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(read);
  EXPECT_EQ(read->status, 200);
  EXPECT_NE(read->body.find("\"writes\":false"), std::string::npos) << read->body;
}

TEST_F(WriteServer, ServeWriteWritesAndReadsBack) {
  start(true);
  const std::string run = "/api/run/" + std::to_string(ids_[0]);
  auto note = post(run + "/note", R"({"text": "lr too high\nsee the sweep"})");
  ASSERT_TRUE(note);
  EXPECT_EQ(note->status, 200) << note->body;
  EXPECT_NE(note->body.find(R"("note":"lr too high\nsee the sweep")"), std::string::npos) << note->body;
  EXPECT_EQ(post(run + "/tag", R"({"key": "owner", "value": "ana"})")->status, 200);
  EXPECT_EQ(post(run + "/tag", R"({"key": "gone", "value": "x"})")->status, 200);
  EXPECT_EQ(post(run + "/tag", R"({"key": "gone", "remove": true})")->status, 200);
  // The page's own way: the cookie and an Origin naming this server.
  auto archived =
      post(run + "/archive", R"({"archived": true})", {{"Cookie", "htm_token=s3cret"}, {"Origin", "http://" + host()}});
  ASSERT_TRUE(archived);
  EXPECT_EQ(archived->status, 200) << archived->body;
  EXPECT_EQ(post("/api/views", R"({"name": "best", "state": "experiment=sweep&sort=test/mse&sel=1,2"})")->status, 200);
  auto back = client().Get((run + "/notes").c_str(), {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(back);
  EXPECT_NE(back->body.find(R"("tags":{"owner":"ana"})"), std::string::npos) << back->body;
  EXPECT_NE(back->body.find(R"("archived":true)"), std::string::npos) << back->body;
  auto page = client().Get(("/api/annotations?runs=" + std::to_string(ids_[0]) + "," + std::to_string(ids_[1])).c_str(),
                           {{"Authorization", "Bearer s3cret"}});
  EXPECT_NE(page->body.find("\"archived_total\":1"), std::string::npos) << page->body;
  auto views = client().Get("/api/views", {{"Authorization", "Bearer s3cret"}});
  EXPECT_NE(views->body.find(R"("state":"experiment=sweep&sort=test/mse&sel=1,2")"), std::string::npos) << views->body;
  // What htm runs and htm query read: the tables, through a read-only connection.
  ResultsStore store(db_path(), OpenMode::read_only);
  EXPECT_EQ(single(store, "SELECT text FROM run_notes"), "lr too high\nsee the sweep");
  EXPECT_EQ(single(store, "SELECT key || '=' || value FROM run_user_tags"), "owner=ana");
  EXPECT_EQ(single(store, "SELECT count(*) FROM tags WHERE run_id = " + std::to_string(ids_[0])), "0");
}

TEST_F(WriteServer, ServeWriteRefusesWithoutTheTokenOrFromAnotherOrigin) {
  start(true);
  const std::string note = "/api/run/" + std::to_string(ids_[0]) + "/note", body = R"({"text": "forged"})";
  const std::vector<httplib::Headers> forged = {
      {},                                                                   // no token
      {{"X-HTM-Token", "wrong!"}},                                          // a wrong one
      {{"Cookie", "htm_token=s3cret"}},                                     // the cookie, no Origin
      {{"Cookie", "htm_token=s3cret"}, {"Origin", "http://evil.example"}},  // another site's page
      {{"X-HTM-Token", "s3cret"}, {"Origin", "http://evil.example"}},       // even with the token
      {{"Cookie", "htm_token=s3cret"}, {"Origin", "http://" + host()}, {"Sec-Fetch-Site", "cross-site"}},
  };
  for (const auto& headers : forged) {
    auto res = post(note, body, headers);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403) << res->body;
    EXPECT_NE(res->body.find("\"error\":"), std::string::npos);
  }
  auto query_token = client().Post((note + "?token=s3cret").c_str(), body, "application/json");  // not for writes
  EXPECT_EQ(query_token->status, 403);
  EXPECT_EQ(annotation_rows(), "0000");
}

TEST_F(WriteServer, ServeWriteBadInputIsOneLineAndItsStatus) {
  start(true);
  const std::string run = "/api/run/" + std::to_string(ids_[0]);
  auto expect = [&](const std::string& path, const std::string& body, int status, const std::string& says) {
    auto res = post(path, body);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, status) << path << " " << body << ": " << res->body;
    EXPECT_NE(res->body.find(says), std::string::npos) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  };
  expect(run + "/note", "{\"text\": ", 400, "not a flat JSON object");
  expect(run + "/note", "{}", 400, "no 'text'");
  expect(run + "/note", "{\"text\": \"" + std::string(kNoteMaxBytes + 1, 'x') + "\"}", 400, "at most 16384");
  expect(run + "/tag", R"({"key": "a b", "value": "x"})", 400, "only letters, digits");
  expect(run + "/tag", R"({"key": "k", "value": "two\nlines"})", 400, "one line");
  expect(run + "/archive", R"({"archived": "yes"})", 400, "true or false");
  expect("/api/run/abc/note", R"({"text": "x"})", 400, "expected a number");
  expect("/api/run/99999/note", R"({"text": "x"})", 404, "no run 99999");
  expect("/api/views", R"({"name": "", "state": "a=1"})", 400, "needs a name");
  expect("/api/views/delete", R"({"name": "nope"})", 404, "no saved view");
  auto form = client().Post((run + "/note").c_str(), {{"X-HTM-Token", "s3cret"}}, "text=x",
                            "application/x-www-form-urlencoded");
  EXPECT_EQ(form->status, 415);
  auto huge = post(run + "/note", std::string(serve::kWriteBodyBytes + 1, ' '));
  EXPECT_EQ(huge->status, 413);
  EXPECT_EQ(annotation_rows(), "0000");  // nothing written by any of them
}

TEST_F(WriteServer, ServeWriteFiftyWritersAtOnceLoseNothing) {
  start(true);
  std::atomic<int> ok{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 50; ++w)
    writers.emplace_back([&, w] {
      const std::string run = "/api/run/" + std::to_string(ids_[w % ids_.size()]);
      for (int i = 0; i < 4; ++i) {
        auto res =
            post(run + "/tag", "{\"key\": \"w" + std::to_string(w) + "_" + std::to_string(i) + "\", \"value\": \"x\"}");
        if (res && res->status == 200) ++ok;
      }
    });
  for (auto& t : writers) t.join();
  EXPECT_EQ(ok.load(), 200);
  EXPECT_EQ(count_of(db_path(), "run_user_tags"), "200");
}

}  // namespace
}  // namespace htm
