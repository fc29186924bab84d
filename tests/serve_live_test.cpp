// htm serve's HTTP server against a live server on a free loopback port: pages and JSON, the
// safety rules (methods, Host, token, traversal, sizes) and slow or half-open clients.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "serve_fixture.h"

namespace htm {
namespace {

// ---- the live server
class LiveServer : public ServeTest {
 protected:
  void start(ServeOptions options) {
    options.db = db_path();
    options.port = 0;
    options.timeout_s = 1;
    if (options.header_timeout_s == ServeOptions{}.header_timeout_s) options.header_timeout_s = 1;
    server_ = std::make_unique<Server>(options);
    thread_ = std::thread([this] { server_->listen(); });
    for (int i = 0; i < 200; ++i) {  // until it answers
      httplib::Client probe("127.0.0.1", server_->port());
      if (probe.Get("/api/runs")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    ServeTest::TearDown();
  }
  httplib::Client client() const { return httplib::Client("127.0.0.1", server_->port()); }

  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(LiveServer, ServesPagesAndJsonAndRefusesWrites) {
  start({});
  auto c = client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  auto api = c.Get("/api/runs?experiment=sweep&where=test%2Fmse%3C2.5");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  EXPECT_NE(api->body.find("\"total\":2"), std::string::npos) << api->body;
  auto bad = c.Get("/api/runs?where=oops");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("expected KEY OP VALUE"), std::string::npos);
  auto study = c.Get("/study/sweep");
  ASSERT_TRUE(study);
  EXPECT_EQ(study->status, 200);
  EXPECT_NE(study->body.find("const LIVE = '/api/study/' + encodeURIComponent(\"sweep\")"), std::string::npos);
  auto missing = c.Get("/study/nothing");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("Content-Type"), "text/html; charset=utf-8");  // a page, not JSON
  EXPECT_NE(missing->body.find("nothing"), std::string::npos) << missing->body;
  EXPECT_EQ(c.Get("/api/sweep/sweep?metric=test%2Fmse")->status, 200);
  EXPECT_EQ(c.Get("/api/study/sweep/curves")->status, 200);
  EXPECT_EQ(c.Get("/api/study/sweep?curves=main")->status, 200);
  auto curves = c.Get("/api/study/sweep?curves=some");
  EXPECT_EQ(curves->status, 400);
  EXPECT_NE(curves->body.find("curves=some: expected main or all"), std::string::npos) << curves->body;
  EXPECT_EQ(c.Get("/api/run/1?after=x")->status, 400);
  auto no_run = c.Get("/run/999");
  EXPECT_EQ(no_run->status, 404);
  EXPECT_NE(no_run->body.find("no run 999"), std::string::npos) << no_run->body;
  // Compressed with gzip, not the library's brotli (seconds for a large study page); the client unzips it.
  auto zipped = c.Get("/study/sweep", {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(zipped);
  EXPECT_EQ(zipped->get_header_value("Content-Encoding"), "gzip");
  EXPECT_NE(zipped->body.find("const LIVE = '/api/study/'"), std::string::npos);
  EXPECT_EQ(c.Get("/api/runs", {{"Accept-Encoding", "br"}})->get_header_value("Content-Encoding"), "br");
  for (auto* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    httplib::Request req;
    req.method = method;
    req.path = "/api/runs";
    auto res = c.send(req);
    ASSERT_TRUE(res) << method;
    EXPECT_EQ(res->status, 405) << method;
  }
  // Nothing was written: the file is as the fixture left it.
  ResultsStore store(db_path(), OpenMode::read_only);
  EXPECT_EQ(single(store, "SELECT count(*) FROM runs"), "8");
}

// Each error is a page where a page was asked for (saying what, with a link to the runs) and JSON
// under /api/ and /artifact/: 404 for what is not there, 400 for what is malformed.
TEST_F(LiveServer, ErrorsArePagesForPagesAndJsonForTheApiWithTheRightStatus) {
  start({});
  auto c = client();
  struct Case {
    std::string path;
    int status;
    bool page;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"/nope", 404, true, "nothing at '/nope'"},
      {"/run/abc", 400, true, "run 'abc': expected a number"},
      {"/run/999", 404, true, "no run 999"},
      {"/run/1/extra", 404, true, "nothing at '/run/1/extra'"},
      {"/sweep/nope", 404, true, "no study 'nope' in this database"},
      {"/sweep/swep", 404, true, "did you mean 'sweep'?"},
      {"/study/swep", 404, true, "no study 'swep' in this database; did you mean 'sweep'?"},
      {"/api/nope", 404, false, "nothing at '/api/nope'"},
      {"/api/run/999", 404, false, "no run 999 in this database"},
      {"/api/run/abc", 400, false, "run 'abc': expected a number"},
      {"/api/run/99999999999999999999", 400, false, "expected a number"},
      {"/api/study/nope", 404, false, "no study 'nope'"},
      {"/api/study/nope/version", 404, false, "no study 'nope'"},
      {"/api/sweep/nope", 404, false, "no study 'nope'"},
      {"/api/sweep/sweep?metric=test%2Fmes", 400, false, "did you mean 'test/mse'?"},
      {"/artifact/99/x.png", 404, false, "{\"error\":\"no run 99 in this database\"}"},
      {"/artifact/abc/x.png", 400, false, "run 'abc': expected a number"},
      {"/api/runs?where=sweep.knd!%3Dlearned", 400, false, "did you mean 'sweep.kind'?"},
      {"/api/runs?group=sweep.knd", 400, false, "group 'sweep.knd': no run has a setting 'sweep.knd'"},
      {"/api/runs?sort=test%2Fmes", 400, false, "did you mean 'test/mse'?"},
  };
  for (const Case& k : cases) {
    auto res = c.Get(k.path);
    ASSERT_TRUE(res) << k.path;
    EXPECT_EQ(res->status, k.status) << k.path;
    EXPECT_EQ(res->get_header_value("Content-Type"), k.page ? "text/html; charset=utf-8" : "application/json")
        << k.path;
    EXPECT_NE(res->body.find(k.says), std::string::npos) << k.path << ": " << res->body;
    if (k.page) EXPECT_NE(res->body.find("<a href=\"/\">all runs</a>"), std::string::npos) << k.path;
    if (!k.page) EXPECT_EQ(res->body.rfind("{\"error\":", 0), 0u) << k.path << ": " << res->body;
  }
  EXPECT_EQ(c.Get("/artifact/99/x.png")->body.find("artifact folder"), std::string::npos);
  EXPECT_EQ(c.Get("/sweep/sweep")->status, 200);
}

TEST_F(LiveServer, ForgedHostsTraversalAndOversizedRequestsAreRefused) {
  start({});
  auto c = client();
  EXPECT_EQ(c.Get("/", {{"Host", "evil.example:8080"}})->status, 403);
  EXPECT_EQ(c.Get("/", {{"Host", "localhost:" + std::to_string(server_->port())}})->status, 200);
  const fs::path folder = dir_ / "runs/a0";
  fs::create_directories(folder);
  mark_artifacts_root((dir_ / "runs").string());  // as htm run does: its runs' files are served
  std::ofstream(folder / "shown.txt") << "shown";
  std::ofstream(dir_ / "secret.txt") << "the secret's bytes";  // a refusal may name the file, never hold it
  const std::string base = "/artifact/" + std::to_string(ids_.front()) + "/";
  auto shown = c.Get(base + "shown.txt");
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->status, 200);
  EXPECT_EQ(shown->body, "shown");
  for (const std::string bad : {"../secret.txt", "..%2fsecret.txt", "%2e%2e/secret.txt", "a/../../secret.txt"}) {
    auto res = c.Get(base + bad);
    ASSERT_TRUE(res) << bad;
    EXPECT_NE(res->status, 200) << bad;
    EXPECT_EQ(res->body.find("the secret's bytes"), std::string::npos) << bad;
  }
  // A row naming a folder outside any marked one (a merged database may): 403, saying why.
  ResultsStore(db_path()).query("UPDATE runs SET artifact_dir = ? WHERE id = ?", {dir_.string(), ids_[1]}, true);
  auto outside = c.Get("/artifact/" + std::to_string(ids_[1]) + "/secret.txt");
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->status, 403);
  EXPECT_NE(outside->body.find("is not under a folder htm run wrote on this machine"), std::string::npos);
  EXPECT_EQ(outside->body.find("the secret's bytes"), std::string::npos) << outside->body;
  auto huge_url = c.Get("/api/runs?where=" + std::string(20000, 'a'));
  EXPECT_TRUE(!huge_url || huge_url->status >= 400);
  httplib::Request req;
  req.method = "GET";
  req.path = "/api/runs";
  req.body = std::string(100000, 'x');
  req.set_header("Content-Type", "text/plain");
  auto big_body = c.send(req);
  EXPECT_TRUE(!big_body || big_body->status == 413) << (big_body ? big_body->status : 0);
}

TEST_F(LiveServer, ATokenGuardsEveryRouteAndOnlyLoopbackMayGoWithout) {
  ServeOptions open_to_all;
  open_to_all.db = db_path();
  open_to_all.host = "0.0.0.0";
  EXPECT_THROW(Server{open_to_all}, Error);
  ServeOptions guarded;
  guarded.token = "s3cret-token";
  start(guarded);
  auto c = client();
  EXPECT_EQ(c.Get("/api/runs")->status, 401);
  EXPECT_EQ(c.Get("/api/runs?token=wrong")->status, 401);
  EXPECT_EQ(c.Get("/api/runs", {{"Authorization", "Bearer s3cret-token"}})->status, 200);
  auto with_query = c.Get("/?token=s3cret-token");
  ASSERT_TRUE(with_query);
  EXPECT_EQ(with_query->status, 200);
  EXPECT_NE(with_query->get_header_value("Set-Cookie").find("HttpOnly"), std::string::npos);
  EXPECT_EQ(c.Get("/api/runs", {{"Cookie", "htm_token=s3cret-token"}})->status, 200);
}

// A connection to the server that has sent half a request head (and never the blank line).
int half_open(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  const std::string partial = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (send(fd, partial.data(), partial.size(), 0) != static_cast<ssize_t>(partial.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// Seconds until the server closes fd (at most `limit`).
double seconds_until_closed(int fd, double limit) {
  const auto start_time = std::chrono::steady_clock::now();
  timeval wait{static_cast<time_t>(limit), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char buffer[256];
  while (recv(fd, buffer, sizeof buffer, 0) > 0) {
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
}

// Half-open connections wait for their head without a worker: with 4 workers, 200 of them
// delay nobody, and each is closed at the header timeout (1 s here).
TEST_F(LiveServer, TwoHundredHalfOpenConnectionsDelayNoRequestAndAreClosedAtTheHeaderTimeout) {
  ServeOptions options;
  options.threads = 4;
  start(options);
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    const int fd = half_open(server_->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    fds.push_back(fd);
  }
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto answer = client().Get("/api/runs");
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, 200);
    EXPECT_LT(took, 1.0) << "a normal request behind 200 half-open connections took " << took << " s";
  }
  for (int fd : fds) {
    EXPECT_LT(seconds_until_closed(fd, 5), 4.0) << "a half-open connection outlived the header timeout";
    close(fd);
  }
}

// One client address holds at most client_connections: beyond them a connection is closed at
// once; when the held ones time out, the client is served again. Of nine half-open connections
// exactly one is closed at once: the ninth, or, on a loaded machine where the server has not yet
// counted start()'s probe as ended when the eighth arrives, the eighth.
TEST_F(LiveServer, AClientBeyondItsConnectionLimitIsClosedAtOnceAndServedOnceItsOthersEnd) {
  ServeOptions options;
  options.client_connections = 8;
  options.header_timeout_s = 3;  // the eight outlive the check on a loaded machine
  start(options);
  std::vector<int> fds;
  for (int i = 0; i < 9; ++i) {
    if (i == 8) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds.push_back(half_open(server_->port()));
    ASSERT_GE(fds.back(), 0) << "connection " << i;
  }
  // Closed by the server: readable, and the read gives end of file. Watched for half a second.
  std::vector<char> closed(fds.size(), 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < until) {
    std::vector<pollfd> watch;
    for (int fd : fds) watch.push_back(pollfd{fd, POLLIN, 0});
    ::poll(watch.data(), watch.size(), 50);
    char byte;
    for (size_t i = 0; i < fds.size(); ++i)
      if (watch[i].revents != 0 && recv(fds[i], &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) closed[i] = 1;
  }
  EXPECT_EQ(std::count(closed.begin(), closed.end(), 1), 1) << "connections of one client closed at once";
  EXPECT_TRUE(closed[8] || closed[7]) << "the connection closed was not one beyond the limit";
  for (int fd : fds) {
    seconds_until_closed(fd, 5);
    close(fd);
  }
  auto answer = client().Get("/api/runs");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
}

TEST_F(LiveServer, ASlowClientIsDroppedAndOthersAreServed) {
  start({});
  const int fd = half_open(server_->port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(client().Get("/api/runs")->status, 200) << "one slow client holds up nobody";
  const auto start_time = std::chrono::steady_clock::now();
  char buffer[256];
  timeval wait{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  while (recv(fd, buffer, sizeof buffer, 0) > 0) {
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  EXPECT_LT(waited, 4.0) << "the server kept a client that sent half a request for " << waited << " s";
  close(fd);
}

}  // namespace
}  // namespace htm
