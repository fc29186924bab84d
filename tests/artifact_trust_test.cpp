// Which run folders named by a database htm reads and writes (store/artifact_trust.h): only those
// under a marker htm run wrote, as a regular file of this user's, or under a root given; inside
// them, only files that are there. A resumed claim of a run elsewhere is held, its row untouched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "store/artifact_trust.h"
#include "store_test_util.h"

namespace htm {
namespace {

class ArtifactTrustTest : public ResultsStoreTest {
 protected:
  void SetUp() override {
    ResultsStoreTest::SetUp();
    dir_ = fs::canonical(dir_);  // a refusal names the folder as written and, where links differ, as resolved
    root_ = dir_ / "runs";
    run_ = root_ / "exp/run-1";
    outside_ = dir_ / "outside";
    fs::create_directories(run_ / "pictures");
    fs::create_directories(outside_);
    std::ofstream(run_ / "pictures/recon.png") << "png";
    std::ofstream(outside_ / "secret.txt") << "secret";
  }
  static ArtifactPath::Verdict verdict(const ArtifactPath& p) { return p.verdict; }

  fs::path root_, run_, outside_;
};

using Verdict = ArtifactPath::Verdict;

TEST_F(ArtifactTrustTest, AFolderUnderTheMarkerHtmRunWroteIsAcceptedAndNoOtherIs) {
  const ArtifactTrust trust;
  const ArtifactPath before = trust.folder(7, run_.string());
  EXPECT_EQ(verdict(before), Verdict::untrusted);
  EXPECT_EQ(before.refusal, "run 7's artifact folder '" + run_.string() +
                                "' is not under a folder htm run wrote on this machine (no .htm-artifacts marker "
                                "above it)");
  mark_artifacts_root(root_.string());
  EXPECT_TRUE(fs::is_regular_file(root_ / kArtifactsMarker));
  const ArtifactPath after = trust.folder(7, run_.string());
  ASSERT_TRUE(after) << after.refusal;
  EXPECT_EQ(after.path, fs::canonical(run_).string());
  EXPECT_TRUE(trust.folder(7, root_.string())) << "the root itself";
  EXPECT_EQ(verdict(trust.folder(7, dir_.string())), Verdict::untrusted) << "above the marker";
  EXPECT_EQ(verdict(trust.folder(7, "/etc")), Verdict::untrusted);
  EXPECT_EQ(verdict(trust.folder(7, outside_.string())), Verdict::untrusted);
  // Written as under the root, but .. leads out; a link in the root to a folder outside likewise.
  EXPECT_EQ(verdict(trust.folder(7, (run_ / "../../../outside").string())), Verdict::untrusted);
  fs::create_symlink(outside_, root_ / "exp/link");
  const ArtifactPath linked = trust.folder(7, (root_ / "exp/link").string());
  EXPECT_EQ(verdict(linked), Verdict::untrusted);
  EXPECT_NE(linked.refusal.find("(" + fs::canonical(outside_).string() + ")"), std::string::npos) << linked.refusal;
  EXPECT_EQ(verdict(trust.folder(7, (root_ / "absent").string())), Verdict::absent);
  EXPECT_EQ(trust.folder(7, "").refusal, "run 7 has no artifact folder");
  EXPECT_EQ(verdict(trust.folder(7, (run_ / "pictures/recon.png").string())), Verdict::absent) << "not a folder";
}

TEST_F(ArtifactTrustTest, AMarkerMustBeThisUsersRegularFile) {
  std::ofstream(outside_ / "real") << "x";
  fs::create_symlink(outside_ / "real", root_ / kArtifactsMarker);
  EXPECT_EQ(verdict(ArtifactTrust().folder(1, run_.string())), Verdict::untrusted) << "a link is no marker";
  EXPECT_THROW(mark_artifacts_root(root_.string()), Error) << "nor is it replaced silently";
  fs::remove(root_ / kArtifactsMarker);
  fs::create_directory(root_ / kArtifactsMarker);
  EXPECT_EQ(verdict(ArtifactTrust().folder(1, run_.string())), Verdict::untrusted) << "a folder is no marker";
  fs::remove(root_ / kArtifactsMarker);
  if (geteuid() != 0) GTEST_SKIP() << "another user's marker needs root to make (chown)";
  std::ofstream(root_ / kArtifactsMarker) << "x";
  ASSERT_EQ(chown((root_ / kArtifactsMarker).c_str(), 65534, 65534), 0);
  EXPECT_EQ(verdict(ArtifactTrust().folder(1, run_.string())), Verdict::untrusted) << "another user's";
}

TEST_F(ArtifactTrustTest, MarkingMakesTheRootOnceAndRefusesTheFileSystemRootAndHome) {
  const fs::path fresh = dir_ / "new/runs";
  mark_artifacts_root(fresh.string());
  std::ifstream in(fresh / kArtifactsMarker);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first.rfind("written by htm run; folders under here are served by htm serve", 0), 0u) << first;
  mark_artifacts_root(fresh.string());  // again: nothing to do
  EXPECT_THROW(mark_artifacts_root("/"), Error);
  const char* home = std::getenv("HOME");
  const std::string saved = home != nullptr ? home : "";
  ::setenv("HOME", outside_.c_str(), 1);
  std::string error;
  try {
    mark_artifacts_root(outside_.string());
  } catch (const Error& e) {
    error = e.what();
  }
  home != nullptr ? ::setenv("HOME", saved.c_str(), 1) : ::unsetenv("HOME");
  EXPECT_NE(error.find("htm serve would serve every file under it"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(outside_ / kArtifactsMarker));
}

TEST_F(ArtifactTrustTest, ARootGivenOnTheCommandLineIsTrustedLikeAMarker) {
  const ArtifactTrust trust({dir_.string()});
  EXPECT_TRUE(trust.folder(3, run_.string()));
  EXPECT_TRUE(trust.folder(3, outside_.string()));
  const ArtifactPath etc = trust.folder(3, "/etc");
  EXPECT_EQ(verdict(etc), Verdict::untrusted);
  EXPECT_NE(etc.refusal.find("nor under a root given with --artifacts"), std::string::npos) << etc.refusal;
  EXPECT_TRUE(ArtifactTrust({outside_.string()}).folder(3, outside_.string()));
  EXPECT_FALSE(ArtifactTrust({outside_.string()}).folder(3, run_.string()));
  EXPECT_THROW(ArtifactTrust({(dir_ / "absent").string()}), Error);
}

TEST_F(ArtifactTrustTest, FilesAreThoseInsideTheAcceptedFolder) {
  mark_artifacts_root(root_.string());
  const ArtifactTrust trust;
  EXPECT_EQ(trust.file(1, run_.string(), "pictures/recon.png").path, fs::canonical(run_ / "pictures/recon.png"));
  fs::create_symlink(outside_ / "secret.txt", run_ / "link.txt");
  for (const std::string bad :
       {"../../../outside/secret.txt", "pictures/../../x", "link.txt", "/etc/passwd", "", "pictures", "nothing.png"}) {
    const ArtifactPath file = trust.file(1, run_.string(), bad);
    EXPECT_EQ(verdict(file), Verdict::absent) << bad;
    EXPECT_EQ(file.path, "") << bad;
  }
  EXPECT_EQ(verdict(trust.file(1, outside_.string(), "secret.txt")), Verdict::untrusted);
  // A path as the artifacts table records it: it must resolve inside the run's folder.
  const ArtifactPath folder = trust.folder(1, run_.string());
  EXPECT_TRUE(ArtifactTrust::recorded_file(folder, (run_ / "pictures/recon.png").string()));
  EXPECT_TRUE(ArtifactTrust::recorded_file(folder, (run_ / "pictures/../pictures/recon.png").string()));
  for (const std::string bad :
       std::vector<std::string>{(outside_ / "secret.txt").string(), "/etc/passwd", (run_ / "link.txt").string(),
                                (run_ / "../run-1/../../../outside/secret.txt").string(), (run_ / "gone.png").string()})
    EXPECT_FALSE(ArtifactTrust::recorded_file(folder, bad)) << bad;
  EXPECT_FALSE(ArtifactTrust::recorded_file(trust.folder(1, outside_.string()), (outside_ / "secret.txt").string()));
}

TEST_F(ArtifactTrustTest, AResumedRunMayNotHaveMadeItsFolderYet) {
  const ArtifactTrust trust;
  const std::string later = (root_ / "exp/run-2").string();
  EXPECT_EQ(verdict(trust.resumable_folder(2, later)), Verdict::untrusted);
  mark_artifacts_root(root_.string());
  const ArtifactPath made_later = trust.resumable_folder(2, later);
  ASSERT_TRUE(made_later) << made_later.refusal;
  EXPECT_EQ(made_later.path, (fs::canonical(root_) / "exp/run-2").string());
  EXPECT_TRUE(trust.resumable_folder(2, run_.string())) << "one that is there: as folder()";
  EXPECT_EQ(verdict(trust.resumable_folder(2, (root_ / "x/../../outside/new").string())), Verdict::untrusted);
  EXPECT_EQ(verdict(trust.resumable_folder(2, (outside_ / "new").string())), Verdict::untrusted);
  EXPECT_EQ(verdict(trust.resumable_folder(2, "/etc/htm-new")), Verdict::untrusted);
}

// The claim is where a resume is decided: a run whose folder htm did not write here is held,
// whatever --force asks, and its row keeps its status, owner and resume count.
TEST_F(ArtifactTrustTest, AClaimDoesNotResumeARunWhoseFolderIsElsewhere) {
  ResultsStore store(db_path());
  RunInfo info = make_run();
  info.artifact_dir = "/etc";
  const int64_t run = store.begin_run(info);
  store.finish_run(run, RunStatus::interrupted, "stopped");
  for (const bool retry : {false, true}) {
    const Claim claim = store.claim_run(info, false, retry);
    EXPECT_EQ(claim.outcome, Claim::Outcome::held);
    EXPECT_TRUE(claim.folder_refused);
    EXPECT_EQ(claim.run_id, run);
    EXPECT_NE(claim.detail.find("run " + std::to_string(run) + "'s artifact folder '/etc' is not under"),
              std::string::npos)
        << claim.detail;
  }
  EXPECT_EQ(single(store, "SELECT status || ' ' || resumes || ' ' || error FROM runs"), "interrupted 0 stopped");
  // The same row pointed at a folder under a marker: resumed.
  mark_artifacts_root(root_.string());
  store.query("UPDATE runs SET artifact_dir = ?", {run_.string()}, true);
  const Claim resumed = store.claim_run(info, false);
  EXPECT_EQ(resumed.outcome, Claim::Outcome::resumed);
  EXPECT_FALSE(resumed.folder_refused);
}

}  // namespace
}  // namespace htm
