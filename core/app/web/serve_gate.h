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
#include <string>

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
  // The library's handling of one request: cpp-httplib 0.11 (Debian 12) reads the peer's address
  // from the stream, later ones (Debian 13's 0.18) are given it.
  template <class Server>
  static auto process(Server& server, httplib::Stream& stream, bool& closed, int)
      -> decltype(server.process_request(stream, true, closed, nullptr)) {
    return server.process_request(stream, /*close_connection=*/true, closed, nullptr);
  }
  template <class Server>
  static bool process(Server& server, httplib::Stream& stream, bool& closed, long) {
    std::string remote, local;
    int remote_port = 0, local_port = 0;
    stream.get_remote_ip_and_port(remote, remote_port);
    stream.get_local_ip_and_port(local, local_port);
    return server.process_request(stream, remote, remote_port, local, local_port, /*close_connection=*/true, closed,
                                  nullptr);
  }
  std::unique_ptr<Room> room_;
};

}  // namespace htm
