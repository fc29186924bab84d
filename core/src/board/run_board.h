// What a supervised run's process is doing, published where its supervisor can read it after
// the process died: the run and database it claimed, the step it is training, the phase and the
// plugin call executing. `htm run` creates the board (one small file, mapped shared), names it in
// the child's HTM_RUN_BOARD (the child removes the name once mapped, so nothing is left in the
// temporary folder however either ends), and reads it when the child ends by a signal: a segfault in a plugin
// can record nothing itself, but the page it wrote to stays (docs/reliability.md). While the
// child lives, the supervisor's watchdog reads its beats: a count every step, plugin call,
// evaluation batch and phase change moves (process/watchdog.h).
#pragma once

#include <cstdint>
#include <string>

#include "htm/manifest.h"

namespace htm {

inline constexpr int kBoardPlugins = 16;

/// What the process is doing between plugin calls; a watchdog's message names it.
enum class BoardPhase : int32_t {
  starting = 0,   ///< before its run's config is read
  constructing,   ///< building the run's plugins and data
  references,     ///< the baselines (mean image, PCA, a linear classifier)
  training,       ///< a training step
  evaluating,     ///< an evaluation
  checkpointing,  ///< writing a checkpoint
  collective,     ///< waiting for the other data-parallel ranks (bounded by the collective timeout)
  finishing,      ///< after training: pictures, the last records
};

/// "in a training step", "waiting for the other ranks (a collective)", ...
const char* board_phase_text(BoardPhase phase);

struct BoardPlugin {
  char kind[16];
  char name[96];
  char version[32];
  char path[512];
};

/// The board's layout: plain data, written by the child and read by its supervisor.
struct RunBoard {
  char magic[8];   ///< "htmrun1"
  int64_t run_id;  ///< 0 until the child claimed its run
  int64_t step;    ///< the step being trained (1-based; 0 before training)
  int64_t total_steps;
  int32_t current;           ///< index into plugins of the plugin executing; -1 none
  int32_t count;             ///< plugins listed
  int32_t database_corrupt;  ///< 1: the run met a malformed database (start nothing more there)
  int32_t phase;             ///< BoardPhase
  uint64_t beats;            ///< moves with every step, plugin call, evaluation batch and phase change
  int64_t stall_timeout_s;   ///< the run's runtime.stall_timeout; -1 before it was read, 0: no watchdog
  int64_t slowest_step_ms;   ///< the longest training step so far (the watchdog waits 10× that at least)
  char call[32];             ///< the plugin call executing ("choose_merges"), "" none
  char db[1024];             ///< the results database the run is recorded in
  char label[256];           ///< "experiment/variant seed S"
  char variant[128];         ///< the run being attempted (board_attempt), claimed or not
  int64_t seed;
  BoardPlugin plugins[kBoardPlugins];
};

// ---- the child's side: each call does nothing when this process has no board

/// Maps the board named by HTM_RUN_BOARD (each path once) and removes the name: the supervisor
/// reads it through its own descriptor. Whether this process has one.
bool open_run_board();
/// Unmaps it: the next open_run_board() maps HTM_RUN_BOARD again (a test plays several children).
void close_run_board();
/// The run this process attempts next, before its plugins are built and it is claimed (a
/// data-parallel rank runs a study's runs one after another): nothing claimed, no step, so a
/// crash in construction is that run's, not the last one's.
void board_attempt(const std::string& label, const std::string& variant, int64_t seed);
/// The run this process trains, once claimed.
void board_run(int64_t run_id, const std::string& db, const std::string& label);
/// The run's database turned out malformed: the supervisor starts no more runs.
void board_database_corrupt();
/// The step being trained (1-based) of `total`: the phase is training.
void board_step(int64_t step, int64_t total);
/// A plugin this process is about to build: it becomes the one executing, and returns its
/// slot; board_built() then ties the built object to the slot and restores `previous`.
int board_building(PluginKind kind, const std::string& name, const std::string& version, const std::string& path,
                   int* previous);
void board_built(int slot, const void* object, int previous);
/// PluginScope's part: the plugin object entered for `call` (a string literal; returns the
/// previous plugin, and the previous call in `previous_call`), and left.
int board_enter(const void* object, const char* call, const char** previous_call);
void board_leave(int previous, const char* previous_call);
/// Progress without a step: an evaluation batch, a checkpoint's file written.
void board_beat();
/// The phase this process enters; returns the one it was in.
BoardPhase board_phase(BoardPhase phase);
/// The run's runtime.stall_timeout (seconds; 0: no watchdog) for its supervisor; a beat, so the
/// limit counts from when it is known, not from the process's start.
void board_stall_timeout(int64_t seconds);
/// A training step's duration: the watchdog never fires before 10× the slowest.
void board_step_seconds(double seconds);

/// A phase for a scope: entered on construction, the previous one restored on destruction.
class PhaseScope {
 public:
  explicit PhaseScope(BoardPhase phase) : previous_(board_phase(phase)) {}
  ~PhaseScope() { board_phase(previous_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  BoardPhase previous_;
};

// ---- the supervisor's side

/// A fresh board file (zeroed, with its magic) under the temporary folder; its path, and in `fd`
/// a descriptor open on it (close-on-exec) that reads it after the child has removed the name.
std::string create_run_board(int* fd);
/// Reads a board through a descriptor create_run_board gave; false when short or never written.
bool read_run_board(int fd, RunBoard* out);
/// "policy plugin 'crashy' 1.0.0 (/path/htm_policy_crashy.so)", or "" when none was executing;
/// with `call`, its call too: "policy plugin 'crashy' 1.0.0 (...) in choose_merges".
std::string board_plugin_text(const RunBoard& board, bool call = false);

}  // namespace htm
