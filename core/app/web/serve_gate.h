// htm serve's front door: an httplib::Server whose workers are given only connections that have
// sent a whole request head. A new connection waits in a waiting room (one thread polling every
// waiting socket) until its head has arrived; one that sends nothing, or half a head, within
// the header timeout is closed there without ever holding a worker, so slow or half-open
// clients cannot starve the others. Each client address may hold a bounded number of
// connections (waiting or served); beyond it a new one is closed at once. The body and the
// response still go by the server's read and write timeouts.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>

namespace htm {

class GatedServer : public httplib::Server {
 public:
  /// `workers` threads serve the requests; `header_timeout`: how long a connection may take to
  /// send its request head; `per_client`: connections one client address may hold at once.
  GatedServer(size_t workers, std::chrono::milliseconds header_timeout, size_t per_client);
  ~GatedServer() override;
  GatedServer(const GatedServer&) = delete;
  GatedServer& operator=(const GatedServer&) = delete;

  /// After binding: the pending-connection queue as long as the system allows (the library asks
  /// for 5, so a burst of connections would wait for the client's SYN retries).
  void widen_backlog();

 protected:
  /// A new connection (called on a worker by the library): admitted to the waiting room, or
  /// closed when its client holds too many.
  bool process_and_close_socket(socket_t sock) override;

 private:
  struct Room;
  bool serve_admitted(socket_t sock);  ///< the library's own handling of a connection whose head is here
  std::unique_ptr<Room> room_;
};

}  // namespace htm
