#include "board/run_board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "htm/error.h"

namespace htm {
namespace {

constexpr char kMagic[8] = "htmrun1";

RunBoard* g_board = nullptr;
const void* g_objects[kBoardPlugins] = {};  // this process's objects for the board's plugin slots

template <size_t N>
void copy(char (&to)[N], const std::string& from) {
  const size_t n = std::min(from.size(), N - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

template <typename T>
void publish(T& field, T value) {
  __atomic_store_n(&field, value, __ATOMIC_RELAXED);
}

void beat() { __atomic_fetch_add(&g_board->beats, uint64_t{1}, __ATOMIC_RELAXED); }

// A call's name, as its supervisor reads it; "" for none.
void publish_call(const char* call) {
  char text[sizeof g_board->call] = {};
  if (call != nullptr) std::strncpy(text, call, sizeof text - 1);
  std::memcpy(g_board->call, text, sizeof text);
}

}  // namespace

namespace {
std::string g_tried;  // the board path last tried: each is mapped once (calls come from one thread)
}  // namespace

bool open_run_board() {
  std::string& tried = g_tried;
  const char* path = std::getenv("HTM_RUN_BOARD");
  if (g_board != nullptr || path == nullptr || *path == '\0' || tried == path) return g_board != nullptr;
  tried = path;
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat file {};
  if (fstat(fd, &file) != 0 || file.st_size < static_cast<off_t>(sizeof(RunBoard))) {  // no board: mapped, a SIGBUS
    close(fd);
    return false;
  }
  void* map = mmap(nullptr, sizeof(RunBoard), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return false;
  auto* board = static_cast<RunBoard*>(map);
  if (std::memcmp(board->magic, kMagic, sizeof kMagic) != 0) {
    munmap(map, sizeof(RunBoard));
    return false;
  }
  // The name has served: the supervisor reads through the descriptor it kept, and a supervisor
  // killed by SIGKILL (or a node's end) can then leave no file behind in the temporary folder.
  unlink(path);
  g_board = board;
  return true;
}

void close_run_board() {
  if (g_board != nullptr) munmap(g_board, sizeof(RunBoard));
  g_board = nullptr;
  g_tried.clear();
}

void board_attempt(const std::string& label, const std::string& variant, int64_t seed) {
  if (!open_run_board()) return;
  publish(g_board->run_id, int64_t{0});
  publish(g_board->step, int64_t{0});
  copy(g_board->label, label);
  copy(g_board->variant, variant);
  publish(g_board->seed, seed);
  publish(g_board->phase, static_cast<int32_t>(BoardPhase::constructing));
  beat();
}

void board_run(int64_t run_id, const std::string& db, const std::string& label) {
  if (!open_run_board()) return;
  copy(g_board->db, db);
  copy(g_board->label, label);
  publish(g_board->run_id, run_id);
}

void board_database_corrupt() {
  if (open_run_board()) publish(g_board->database_corrupt, 1);
}

void board_step(int64_t step, int64_t total) {
  if (g_board == nullptr) return;
  publish(g_board->total_steps, total);
  publish(g_board->step, step);
  publish(g_board->phase, static_cast<int32_t>(BoardPhase::training));
  beat();
}

int board_building(PluginKind kind, const std::string& name, const std::string& version, const std::string& path,
                   int* previous) {
  *previous = -1;
  if (!open_run_board()) return -1;
  const int slot = g_board->count < kBoardPlugins ? g_board->count : kBoardPlugins - 1;  // full: reuse the last
  BoardPlugin& p = g_board->plugins[slot];
  copy(p.kind, kind_name(kind));
  copy(p.name, name);
  copy(p.version, version);
  copy(p.path, path);
  g_objects[slot] = nullptr;
  if (slot == g_board->count) publish(g_board->count, slot + 1);
  *previous = g_board->current;
  publish(g_board->current, slot);
  publish_call("its constructor");
  beat();
  return slot;
}

void board_built(int slot, const void* object, int previous) {
  if (g_board == nullptr || slot < 0) return;
  g_objects[slot] = object;
  publish(g_board->current, previous);
  publish_call(nullptr);
  beat();
}

namespace {
const char* g_call = nullptr;  // the call executing, as this process knows it (its board has a copy)
}  // namespace

int board_enter(const void* object, const char* call, const char** previous_call) {
  *previous_call = g_call;
  if (g_board == nullptr) return -1;
  const int previous = g_board->current;
  for (int i = 0; i < g_board->count; ++i)
    if (g_objects[i] == object) {
      publish(g_board->current, i);
      break;
    }
  g_call = call;
  publish_call(call);
  beat();
  return previous;
}

void board_leave(int previous, const char* previous_call) {
  if (g_board == nullptr) return;
  publish(g_board->current, previous);
  g_call = previous_call;
  publish_call(previous_call);
  beat();
}

void board_beat() {
  if (g_board != nullptr) beat();
}

BoardPhase board_phase(BoardPhase phase) {
  if (g_board == nullptr) return BoardPhase::starting;
  const auto previous = static_cast<BoardPhase>(g_board->phase);
  publish(g_board->phase, static_cast<int32_t>(phase));
  beat();
  return previous;
}

void board_stall_timeout(int64_t seconds) {
  if (!open_run_board()) return;
  publish(g_board->stall_timeout_s, seconds);
  beat();  // the limit counts from when it is known: a slow start before it (libtorch, the config) is no stall
}

void board_step_seconds(double seconds) {
  if (g_board == nullptr) return;
  const auto ms = static_cast<int64_t>(seconds * 1000);
  if (ms > g_board->slowest_step_ms) publish(g_board->slowest_step_ms, ms);
}

const char* board_phase_text(BoardPhase phase) {
  switch (phase) {
    case BoardPhase::starting:
      return "starting";
    case BoardPhase::constructing:
      return "building its plugins and data";
    case BoardPhase::references:
      return "computing the references";
    case BoardPhase::training:
      return "in a training step";
    case BoardPhase::evaluating:
      return "evaluating";
    case BoardPhase::checkpointing:
      return "writing a checkpoint";
    case BoardPhase::collective:
      return "waiting for the other ranks (a collective)";
    case BoardPhase::finishing:
      return "finishing (pictures, the last records)";
  }
  return "in an unknown phase";
}

std::string create_run_board(int* fd_out) {
  std::error_code ec;
  std::string folder = std::filesystem::temp_directory_path(ec).string();
  if (ec || folder.empty()) folder = "/tmp";
  std::string path = folder + "/htm-board-XXXXXX";
  const int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) throw Error("cannot create a run board under " + folder + ": " + std::strerror(errno));
  RunBoard board{};
  std::memcpy(board.magic, kMagic, sizeof kMagic);
  board.current = -1;
  board.stall_timeout_s = -1;
  if (write(fd, &board, sizeof board) != static_cast<ssize_t>(sizeof board)) {
    close(fd);
    unlink(path.c_str());
    throw Error("cannot write a run board in " + folder + " (is the disk full?)");
  }
  *fd_out = fd;
  return path;
}

bool read_run_board(int fd, RunBoard* out) {
  const bool whole = pread(fd, out, sizeof *out, 0) == static_cast<ssize_t>(sizeof *out);
  if (!whole || std::memcmp(out->magic, kMagic, sizeof kMagic) != 0) return false;
  out->db[sizeof out->db - 1] = out->label[sizeof out->label - 1] = out->call[sizeof out->call - 1] = '\0';
  for (auto& p : out->plugins)
    p.kind[sizeof p.kind - 1] = p.name[sizeof p.name - 1] = p.version[sizeof p.version - 1] =
        p.path[sizeof p.path - 1] = '\0';
  return true;
}

std::string board_plugin_text(const RunBoard& board, bool call) {
  if (board.current < 0 || board.current >= std::min(board.count, kBoardPlugins)) return "";
  const BoardPlugin& p = board.plugins[board.current];
  const std::string text = std::string(p.kind) + " plugin '" + p.name + "' " + p.version + " (" + p.path + ")";
  return call && board.call[0] != '\0' ? text + " in " + board.call : text;
}

}  // namespace htm
