// Who trains which run: claims with an owner (host, pid, start time) and a heartbeat, so that
// two processes split a study's runs, and a run whose process is gone is settled as killed and
// resumed by the next one that asks for it.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "htm/error.h"
#include "store/artifact_trust.h"
#include "store/results_store.h"
#include "store/sqlite.h"

namespace htm {

using store::fail;
using store::now_seconds;
using store::Statement;
using store::Transaction;

namespace {

// Start time of a process (clock ticks since boot, /proc/PID/stat field 22); 0 when there is no
// such process, or only its zombie: a process killed while its parent was gone may wait for a
// PID 1 that never reaps it (in a container), and it trains nothing.
int64_t process_start(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= text.size()) return 0;
  if (text[paren + 2] == 'Z' || text[paren + 2] == 'X') return 0;  // field 3, the state: dead
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)  // field 22: start time in clock ticks
    if (i == 22) return std::atoll(field.c_str());
  return 0;
}

std::string this_host() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string owner_text(const RunOwner& owner) { return "host " + owner.host + " pid " + std::to_string(owner.pid); }

// A supervisor's record of a run still under `owner_pid`: `sql` binds the end time, the message,
// the run and the owner, in that order. Whether a row changed (none: the process recorded its
// outcome itself, or another owner has the run now).
bool update_owned(sqlite3* db, const std::string& path, const char* sql, int64_t run_id, int64_t owner_pid,
                  const std::string& message) {
  Statement(db, path, sql)
      .bind_real(1, now_seconds())
      .bind_text(2, message)
      .bind_int(3, run_id)
      .bind_int(4, owner_pid)
      .run();
  return sqlite3_changes(db) > 0;
}

}  // namespace

RunOwner RunOwner::self() { return of(getpid()); }

RunOwner RunOwner::of(int64_t pid) { return {this_host(), pid, process_start(pid)}; }

bool owner_alive(const RunOwner& owner, double heartbeat_at, double now) {
  if (owner.pid <= 0) return false;  // a row written before owners were recorded
  if (owner.host == this_host()) {
    if (kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno != EPERM) return false;
    return process_start(owner.pid) == owner.start;
  }
  return now - heartbeat_at < kHeartbeatTimeoutS;
}

Claim ResultsStore::claim_run(const RunInfo& info, bool force, bool retry_crashed) {
  Transaction transaction(db_, path_);  // BEGIN IMMEDIATE: one claimer at a time
  const RunOwner me = RunOwner::self();
  const double now = now_seconds();
  Claim claim;
  Statement latest(db_, path_,
                   "SELECT r.id, r.status, r.artifact_dir, r.owner_host, r.owner_pid, r.owner_start, "
                   "r.heartbeat_at, coalesce(c.value, 0), s.value FROM runs r "
                   "JOIN experiments e ON e.id = r.experiment_id "
                   "LEFT JOIN tags c ON c.run_id = r.id AND c.key = 'crashes' "
                   "LEFT JOIN tags s ON s.run_id = r.id AND s.key = 'crash_step' "
                   "WHERE e.name = ? AND r.variant = ? AND r.seed = ? AND r.config_hash = ? "
                   "AND (r.status IN ('finished', 'running', 'interrupted', 'killed') "
                   "OR (r.status = 'failed' AND c.value IS NOT NULL)) "
                   "ORDER BY (r.status = 'finished') DESC, r.id DESC LIMIT 1");
  latest.bind_text(1, info.experiment).bind_text(2, info.variant).bind_int(3, info.seed).bind_text(4, info.config_hash);
  const bool found = latest.step();
  const std::string status = found ? latest.column_text(1) : "";
  const int64_t id = found ? latest.column_int(0) : 0;
  const std::string artifact_dir = found ? latest.column_text(2) : "";
  const RunOwner owner{found ? latest.column_text(3) : "", found ? latest.column_int(4) : 0,
                       found ? latest.column_int(5) : 0};
  const double heartbeat_at = found ? latest.column_real(6) : 0;
  const int64_t crashes = found ? latest.column_int(7) : 0;
  if (found && status == "finished" && !force) {
    transaction.commit();
    return {Claim::Outcome::finished, id, artifact_dir, ""};
  }
  if (found && status == "running" && owner_alive(owner, heartbeat_at, now)) {
    transaction.commit();
    return {Claim::Outcome::taken, id, artifact_dir, owner_text(owner)};
  }
  if (found && status == "failed" && crashes >= kCrashesHeld && !force && !retry_crashed) {
    transaction.commit();
    return {Claim::Outcome::held, id, artifact_dir,
            "it crashed " + std::to_string(crashes) + " times at step " + latest.column_text(8)};
  }
  if (found && status != "finished" && !force) {
    // A resumed run reads and writes its folder: only one htm made here (artifact_trust.h). A
    // refused run's row stays as it was.
    const ArtifactPath folder = ArtifactTrust().resumable_folder(id, artifact_dir);
    if (!folder) {
      transaction.commit();
      Claim refused{Claim::Outcome::held, id, artifact_dir, folder.refusal};
      refused.folder_refused = true;
      return refused;
    }
    Statement(db_, path_,
              "UPDATE runs SET status = 'running', ended_at = NULL, error = NULL, owner_host = ?, "
              "owner_pid = ?, owner_start = ?, heartbeat_at = ?, resumes = resumes + 1 WHERE id = ?")
        .bind_text(1, me.host)
        .bind_int(2, me.pid)
        .bind_int(3, me.start)
        .bind_real(4, now)
        .bind_int(5, id)
        .run();
    transaction.commit();
    return {Claim::Outcome::resumed, id, artifact_dir,
            status == "running"  ? "killed"
            : status == "failed" ? "crashed at step " + latest.column_text(8)
                                 : status};
  }
  claim.run_id = insert_run(info, me);
  claim.artifact_dir = info.artifact_dir;
  transaction.commit();
  return claim;
}

int64_t ResultsStore::record_crash(int64_t run_id, int64_t owner_pid, int64_t step, const std::string& message) {
  return crash(run_id, owner_pid, step, message, false);
}

int64_t ResultsStore::record_rank_crash(int64_t run_id, int64_t owner_pid, int64_t step, const std::string& message) {
  return crash(run_id, owner_pid, step, message, true);
}

bool ResultsStore::record_interrupted(int64_t run_id, int64_t owner_pid, const std::string& message) {
  Transaction transaction(db_, path_);
  const bool recorded = update_owned(db_, path_,
                                     "UPDATE runs SET status = 'interrupted', ended_at = ?, error = ? WHERE id = ? "
                                     "AND status IN ('running', 'killed') AND owner_pid = ?",
                                     run_id, owner_pid, message);
  transaction.commit();
  return recorded;
}

int64_t ResultsStore::crash(int64_t run_id, int64_t owner_pid, int64_t step, const std::string& message,
                            bool over_own_outcome) {
  Transaction transaction(db_, path_);
  // 'killed' too: another htm process (a sibling job starting, `htm run` beside it) may find the
  // dead child's row before its supervisor does and settle it as killed (settle_stale); the
  // supervisor saw how it died and says so. A run resumed since has another owner.
  const bool recorded = update_owned(
      db_, path_,
      over_own_outcome
          ? "UPDATE runs SET status = 'failed', ended_at = ?, error = ? || coalesce('; then ' || error, '') "
            "WHERE id = ? AND status IN ('running', 'failed', 'interrupted') AND owner_pid = ?"
          : "UPDATE runs SET status = 'failed', ended_at = ?, error = ? WHERE id = ? AND status IN "
            "('running', 'killed') AND owner_pid = ?",
      run_id, owner_pid, message);
  if (!recorded) {  // recorded by the process itself, or taken over: not ours to say
    transaction.commit();
    return 0;
  }
  Statement previous(db_, path_,
                     "SELECT coalesce(c.value, 0), s.value FROM runs r LEFT JOIN tags c ON c.run_id = r.id "
                     "AND c.key = 'crashes' LEFT JOIN tags s ON s.run_id = r.id AND s.key = 'crash_step' "
                     "WHERE r.id = ?");
  previous.bind_int(1, run_id).step();
  const int64_t crashes = previous.column_text(1) == std::to_string(step) ? previous.column_int(0) + 1 : 1;
  Statement tag(db_, path_, "INSERT OR REPLACE INTO tags(run_id, key, value) VALUES (?, ?, ?)");
  tag.bind_int(1, run_id).bind_text(2, "crashes").bind_text(3, std::to_string(crashes)).run();
  tag.bind_int(1, run_id).bind_text(2, "crash_step").bind_text(3, std::to_string(step)).run();
  if (crashes >= kCrashesHeld)
    Statement(db_, path_, "UPDATE runs SET error = error || ? WHERE id = ?")
        .bind_text(1, "; it crashed " + std::to_string(crashes) +
                          " times at this step, so htm run does not resume "
                          "it (htm resume " +
                          std::to_string(run_id) + " --force retries it)")
        .bind_int(2, run_id)
        .run();
  transaction.commit();
  return crashes;
}

void ResultsStore::heartbeat(int64_t run_id) {
  const RunOwner me = RunOwner::self();
  Statement(db_, path_,
            "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND status = 'running' AND owner_host = ? "
            "AND owner_pid = ? AND owner_start = ?")
      .bind_real(1, now_seconds())
      .bind_int(2, run_id)
      .bind_text(3, me.host)
      .bind_int(4, me.pid)
      .bind_int(5, me.start)
      .run();
  if (sqlite3_changes(db_) == 0)
    fail(path_, "run " + std::to_string(run_id) +
                    " is no longer this process's: another process recorded it "
                    "killed (its heartbeat was older than " +
                    std::to_string(static_cast<int>(kHeartbeatTimeoutS)) + " s) and may have resumed it");
}

std::vector<int64_t> ResultsStore::stale_runs() {
  std::vector<int64_t> stale;
  const double now = now_seconds();
  Statement running(db_, path_,
                    "SELECT id, owner_host, owner_pid, owner_start, heartbeat_at FROM runs WHERE status = 'running'");
  while (running.step()) {
    const RunOwner owner{running.column_text(1), running.column_int(2), running.column_int(3)};
    if (!owner_alive(owner, running.column_real(4), now)) stale.push_back(running.column_int(0));
  }
  return stale;
}

std::vector<int64_t> ResultsStore::settle_stale() {
  Transaction transaction(db_, path_);
  const std::vector<int64_t> stale = stale_runs();
  Statement settle(db_, path_,
                   "UPDATE runs SET status = 'killed', ended_at = coalesce(heartbeat_at, started_at), "
                   "error = 'its process (' || coalesce('host ' || owner_host || ' pid ' || owner_pid, 'not recorded') "
                   "|| ') ended without recording an outcome' WHERE id = ? AND status = 'running'");
  for (int64_t id : stale) settle.bind_int(1, id).run();
  transaction.commit();
  return stale;
}

void ResultsStore::truncate_after(int64_t run_id, int64_t step) {
  Transaction transaction(db_, path_);
  Statement(db_, path_, "DELETE FROM metrics WHERE run_id = ? AND step > ?")
      .bind_int(1, run_id)
      .bind_int(2, step)
      .run();
  Statement(db_, path_, "DELETE FROM artifacts WHERE run_id = ? AND step > ?")
      .bind_int(1, run_id)
      .bind_int(2, step)
      .run();
  transaction.commit();
}

}  // namespace htm
