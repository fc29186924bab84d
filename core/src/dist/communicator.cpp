#define USE_C10D_GLOO 1  // Debian's libtorch is built with Gloo; its header asks for this switch
#include "dist/communicator.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "board/run_board.h"
#include "htm/error.h"

namespace htm {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int fallback, int lo, int hi) {
  auto text = env(name);
  if (!text) return fallback;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text->c_str(), &end, 10);
  if (errno != 0 || end == text->c_str() || *end != '\0' || v < lo || v > hi)
    throw Error("environment variable " + std::string(name) + "='" + *text + "' is not an integer in " +
                std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int>(v);
}

// The text of a c10d or Gloo failure without libtorch's backtrace.
std::string reason(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

// torch 2.4 and later serve the rendezvous through libuv unless told not to; a libtorch built
// without it (Debian 13's 2.6) refuses that, and takes its classic server when asked. False
// where the options have no such choice (1.x: the classic server alone).
template <class Options>
auto without_libuv(Options& options, int) -> decltype(options.useLibUV = false, true) {
  if (!options.useLibUV) return false;
  options.useLibUV = false;
  return true;
}
template <class Options>
bool without_libuv(Options&, long) {
  return false;
}

}  // namespace

std::optional<WorldInfo> world_from_environment() {
  const int world = env_int("WORLD_SIZE", 1, 1, 1 << 16);
  if (world == 1) return std::nullopt;
  WorldInfo w;
  w.world = world;
  if (!env("RANK")) throw Error("WORLD_SIZE=" + std::to_string(world) + " is set but RANK is not");
  w.rank = env_int("RANK", 0, 0, world - 1);
  w.local_world = env_int("LOCAL_WORLD_SIZE", world, 1, world);
  w.local_rank = env_int("LOCAL_RANK", w.rank % w.local_world, 0, w.local_world - 1);
  if (auto addr = env("MASTER_ADDR"))
    w.master_addr = *addr;
  else
    throw Error("WORLD_SIZE=" + std::to_string(world) + " is set but MASTER_ADDR is not (the host of rank 0)");
  w.master_port = env_int("MASTER_PORT", 29500, 1, 65535);
  return w;
}

std::pair<int64_t, int64_t> rows_of_rank(int64_t count, int rank, int world) {
  const int64_t base = count / world, extra = count % world;
  const int64_t offset = rank * base + std::min<int64_t>(rank, extra);
  return {offset, base + (rank < extra ? 1 : 0)};
}

struct Communicator::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  std::string where;  ///< "rank R of W" for messages

  // Runs a collective and waits for it; a failure means another rank is gone or hung.
  template <typename F>
  void collective(const char* what, F&& f) {
    try {
      f()->wait();
    } catch (const std::exception& e) {
      throw Error(where + ": the " + std::string(what) +
                  " with the other ranks failed (a rank stopped or hung): " + reason(e));
    }
  }
};

Communicator::Communicator(const WorldInfo& world, const std::string& identity, std::chrono::seconds timeout)
    : info_(world), impl_(std::make_unique<Impl>()) {
  // c10d logs each rendezvous retry and failure through c10's logging (glog where libtorch was
  // built with it, as Debian's 1.13 is; c10's own logger otherwise, as in the 2.x wheels); the
  // failures become one message below, so its own lines are kept out of the way unless
  // GLOG_minloglevel or TORCH_CPP_LOG_LEVEL asks for them.
#ifdef C10_USE_GLOG
  if (!env("GLOG_minloglevel")) FLAGS_minloglevel = std::max<int32_t>(FLAGS_minloglevel, google::GLOG_FATAL);
#else
  if (!env("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = std::max<int>(FLAGS_caffe2_log_level, c10::GLOG_FATAL);
#endif
  impl_->where = "rank " + std::to_string(world.rank) + " of " + std::to_string(world.world);
  // A peer that died closes its sockets; Gloo's next write to one would raise SIGPIPE and end this
  // rank too, unrecorded ("crashed: SIGPIPE" where "the other ranks failed" belongs). Ignored, the
  // write fails with EPIPE and Gloo throws, which the collective turns into that message.
  std::signal(SIGPIPE, SIG_IGN);
  const std::string master = world.master_addr + ":" + std::to_string(world.master_port);
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(world.master_port);
    options.isServer = world.rank == 0;
    options.numWorkers = world.world;
    options.waitWorkers = true;
    options.timeout = timeout;
    try {
      impl_->store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    } catch (const std::exception& e) {
      if (reason(e).find("libuv") == std::string::npos || !without_libuv(options, 0)) throw;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    }
  } catch (const std::exception& e) {
    throw Error(impl_->where + ": " +
                (world.rank == 0 ? "cannot serve the rendezvous on port " + std::to_string(world.master_port) +
                                       " or not every rank joined within " + std::to_string(timeout.count()) + " s"
                                 : "cannot reach the rendezvous at " + master + " (MASTER_ADDR:MASTER_PORT) within " +
                                       std::to_string(timeout.count()) + " s") +
                ": " + reason(e));
  }
  // Every rank must run the same experiment: compare the identities before training anything.
  // Each rank says it has compared before any leaves, so rank 0's store outlives every reading.
  std::string mismatch;
  try {
    impl_->store->set("htm/identity/" + std::to_string(world.rank),
                      std::vector<uint8_t>(identity.begin(), identity.end()));
    std::vector<std::string> checked;
    for (int r = 0; r < world.world; ++r) {
      checked.push_back("htm/checked/" + std::to_string(r));
      if (r == world.rank) continue;
      const auto bytes = impl_->store->get("htm/identity/" + std::to_string(r));
      const std::string other(bytes.begin(), bytes.end());
      if (other != identity && mismatch.empty())
        mismatch = impl_->where + " runs another experiment than rank " + std::to_string(r) + " (" + identity +
                   " here, " + other + " there): every rank must be given the same file and options";
    }
    impl_->store->set(checked[world.rank], std::vector<uint8_t>{1});
    impl_->store->wait(checked);
  } catch (const std::exception& e) {
    if (!mismatch.empty()) throw Error(mismatch);
    throw Error(
        impl_->where + ": " +
        (world.rank == 0
             ? "the other ranks did not state their experiment within " + std::to_string(timeout.count()) + " s"
             : "what answers at " + master + " (MASTER_ADDR:MASTER_PORT) is not htm's rank 0, or rank 0 stopped") +
        ": " + reason(e));
  }
  if (!mismatch.empty()) throw Error(mismatch);
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // On 1.13 the group needs an explicit device: loopback when every rank is on this host,
    // else GLOO_SOCKET_IFNAME's interface (as torch.distributed reads it) or the address this
    // host's name resolves to.
    const bool local = world.master_addr == "127.0.0.1" || world.master_addr == "localhost";
    if (local)
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else if (auto interface = env("GLOO_SOCKET_IFNAME"))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*interface));
    else
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 1;
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::static_intrusive_pointer_cast<c10d::Store>(impl_->store), world.rank, world.world, options);
  } catch (const std::exception& e) {
    throw Error(impl_->where + ": cannot connect the Gloo process group: " + reason(e));
  }
}

Communicator::~Communicator() = default;

std::vector<double> Communicator::sum(const std::vector<double>& values) {
  if (values.empty()) return {};
  PhaseScope waiting(BoardPhase::collective);  // a peer's stall is its watchdog's to name, not this rank's
  auto t = torch::tensor(values, torch::kDouble);
  std::vector<at::Tensor> one{t};
  impl_->collective("sum", [&] { return impl_->group->allreduce(one); });
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

void Communicator::broadcast(at::Tensor& tensor) {
  PhaseScope waiting(BoardPhase::collective);
  std::vector<at::Tensor> one{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = 0;
  impl_->collective("broadcast", [&] { return impl_->group->broadcast(one, options); });
}

std::string Communicator::broadcast_bytes(const std::string& bytes) {
  auto size = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kLong);
  broadcast(size);
  auto data = torch::empty({size.item<int64_t>()}, torch::kUInt8);
  if (rank() == 0 && !bytes.empty()) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  if (data.numel() > 0) broadcast(data);
  return std::string(reinterpret_cast<const char*>(data.data_ptr()), static_cast<size_t>(data.numel()));
}

void Communicator::start_all_reduce(at::Tensor& buffer) {
  std::vector<at::Tensor> one{buffer};
  try {
    impl_->pending.push_back(impl_->group->allreduce(one));
  } catch (const std::exception& e) {
    throw Error(impl_->where + ": cannot start the gradient sum with the other ranks: " + reason(e));
  }
}

void Communicator::wait_all() {
  PhaseScope waiting(BoardPhase::collective);
  auto pending = std::move(impl_->pending);
  impl_->pending.clear();
  for (auto& work : pending) impl_->collective("gradient sum", [&] { return work; });
}

}  // namespace htm
