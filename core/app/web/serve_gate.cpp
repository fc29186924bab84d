#include "web/serve_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace htm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPeek = 16384;  // a head this long is handed on (the library refuses it)
constexpr auto kTick = std::chrono::milliseconds(20);

void close_now(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

bool wait_for(int fd, short events, time_t sec, time_t usec) {
  pollfd p{fd, events, 0};
  const int ms = static_cast<int>(sec * 1000 + usec / 1000);
  for (;;) {
    const int n = ::poll(&p, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & (events | POLLHUP)) != 0 && (p.revents & (POLLERR | POLLNVAL)) == 0;
  }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ip.clear();
  port = 0;
  if ((peer ? getpeername : getsockname)(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// One admitted connection as the library's request processing reads and writes it, with the
// server's read and write timeouts on every wait.
class GateStream : public httplib::Stream {
 public:
  GateStream(int fd, time_t read_sec, time_t read_usec, time_t write_sec, time_t write_usec)
      : fd_(fd), read_sec_(read_sec), read_usec_(read_usec), write_sec_(write_sec), write_usec_(write_usec) {}
  bool is_readable() const override { return wait_for(fd_, POLLIN, read_sec_, read_usec_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_sec_, write_usec_); }
  ssize_t read(char* ptr, size_t size) override {
    if (!is_readable()) return -1;
    for (;;) {
      const ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    for (;;) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  time_t read_sec_, read_usec_, write_sec_, write_usec_;
};

}  // namespace

struct GatedServer::Room {
  struct Waiting {
    std::string peer;
    Clock::time_point deadline;
    bool partial = false;  // some of the head is there: peeked each tick, not polled
  };

  GatedServer* owner;
  size_t worker_count;
  std::chrono::milliseconds header_timeout;
  size_t per_client;

  std::mutex mutex;
  std::map<int, Waiting> waiting;
  std::map<std::string, size_t> held;  // connections per client address, waiting or served
  bool open = true;

  std::unique_ptr<httplib::ThreadPool> workers;
  bool workers_down = false;
  int wake = -1;
  std::atomic<bool> stopping{false};
  std::thread thread;

  void release(const std::string& peer) {  // with the mutex held
    auto it = held.find(peer);
    if (it != held.end() && --it->second == 0) held.erase(it);
  }

  // A connection the library accepted: into the room, or closed.
  void admit(int fd) {
    std::string peer;
    int port = 0;
    address_of(fd, true, peer, port);
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = held.find(peer);
      if (open && (it == held.end() || it->second < per_client)) {
        ++held[peer];
        waiting[fd] = {peer, Clock::now() + header_timeout, false};
        const uint64_t one = 1;
        (void)!::write(wake, &one, sizeof one);
        return;
      }
    }
    close_now(fd);
  }

  // Its head has arrived: a worker serves it (the library's own loop), then the client's count drops.
  void hand_on(int fd, const std::string& peer) {  // with the mutex held
    workers->enqueue([this, fd, peer] {
      owner->serve_admitted(fd);
      std::lock_guard<std::mutex> lock(mutex);
      release(peer);
    });
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<char> buffer(kPeek);
    while (!stopping.load()) {
      fds.assign(1, pollfd{wake, POLLIN, 0});
      {
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& [fd, w] : waiting)
          if (!w.partial) fds.push_back(pollfd{fd, POLLIN, 0});
      }
      ::poll(fds.data(), fds.size(), static_cast<int>(kTick.count()));
      if (fds[0].revents != 0) {
        uint64_t n = 0;
        (void)!::read(wake, &n, sizeof n);
      }
      std::map<int, short> ready;
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) ready[fds[i].fd] = fds[i].revents;
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(mutex);
      for (auto it = waiting.begin(); it != waiting.end();) {
        const int fd = it->first;
        Waiting& w = it->second;
        if (w.partial || ready.count(fd)) {
          const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {  // gone
            close_now(fd);
            release(w.peer);
            it = waiting.erase(it);
            continue;
          }
          if (n > 0) {
            const std::string_view head(buffer.data(), static_cast<size_t>(n));
            if (head.find("\r\n\r\n") != std::string_view::npos || head.find("\n\n") != std::string_view::npos ||
                static_cast<size_t>(n) == buffer.size()) {
              hand_on(fd, w.peer);
              it = waiting.erase(it);
              continue;
            }
            w.partial = true;
          }
        }
        if (now >= w.deadline) {
          close_now(fd);
          release(w.peer);
          it = waiting.erase(it);
          continue;
        }
        ++it;
      }
    }
  }

  // The library's listen loop ends: no connection waits any more, then the workers finish.
  void shut() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!open) return;
      open = false;
    }
    stopping = true;
    if (thread.joinable()) thread.join();
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& [fd, w] : waiting) {
        close_now(fd);
        release(w.peer);
      }
      waiting.clear();
    }
    if (workers && !workers_down) {
      workers->shutdown();
      workers_down = true;
    }
  }
};

namespace {

// What the library's listen loop is given as its task queue: each accepted connection is admitted
// (or closed) at once on the loop's own thread, in the order it was accepted (on a worker, a
// client's ninth connection could be counted before its eighth), and the loop's end shuts the
// room. Admitting is a few map operations; serving is the workers'.
class RoomQueue : public httplib::TaskQueue {
 public:
  explicit RoomQueue(std::function<void(std::function<void()>)> enqueue, std::function<void()> shutdown)
      : enqueue_(std::move(enqueue)), shutdown_(std::move(shutdown)) {}
  // cpp-httplib 0.11 (Debian 12) returns nothing here; later ones whether the task was queued.
  using Queued = decltype(std::declval<httplib::TaskQueue&>().enqueue(std::function<void()>()));
  Queued enqueue(std::function<void()> fn) override {
    enqueue_(std::move(fn));
    return static_cast<Queued>(true);  // void(true) where it returns nothing
  }
  void shutdown() override { shutdown_(); }

 private:
  std::function<void(std::function<void()>)> enqueue_;
  std::function<void()> shutdown_;
};

}  // namespace

GatedServer::GatedServer(size_t workers, std::chrono::milliseconds header_timeout, size_t per_client)
    : room_(std::make_unique<Room>()) {
  Room& room = *room_;
  room.owner = this;
  room.worker_count = workers;
  room.header_timeout = header_timeout;
  room.per_client = per_client;
  room.wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  new_task_queue = [&room] {
    room.workers = std::make_unique<httplib::ThreadPool>(room.worker_count);
    room.thread = std::thread([&room] { room.run(); });
    return new RoomQueue([](std::function<void()> admit) { admit(); }, [&room] { room.shut(); });
  };
}

GatedServer::~GatedServer() {
  room_->shut();
  if (room_->wake >= 0) ::close(room_->wake);
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  room_->admit(sock);
  return true;
}

bool GatedServer::serve_admitted(socket_t sock) {
  // One request, answered with Connection: close (a kept-alive connection would hold its worker).
  GateStream stream(sock, read_timeout_sec_, read_timeout_usec_, write_timeout_sec_, write_timeout_usec_);
  bool closed = false;
  const bool ok = process(*this, stream, closed, 0);
  close_now(sock);
  return ok;
}

void GatedServer::widen_backlog() {
  const socket_t sock = svr_sock_;
  if (sock != INVALID_SOCKET) ::listen(sock, SOMAXCONN);  // Linux: a second listen() sets the backlog
}

}  // namespace htm
