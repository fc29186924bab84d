// core/app/commands/tensorboard.*: what the ctest python.export_tensorboard decoder cannot reach
// from a database: tags that are not UTF-8, and the name a file has while it is written.
// (Every record's framing, CRCs and values: tests/python/export_tensorboard.py.)
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "commands/tensorboard.h"

namespace htm {
namespace {

TEST(TensorBoard, TagsAndTextsAreWrittenAsUtf8) {
  const std::string bad = std::string("train/a") + '\xff' + "b" + '\xc3';  // a stray byte, a cut sequence
  const std::string event = tensorboard::scalar_event(1.0, 3, bad, 0.5f);
  EXPECT_NE(event.find("train/a?b?"), std::string::npos);
  EXPECT_EQ(event.find('\xff'), std::string::npos);
  // é, è, ✓ and 🌳 stay as they are.
  const std::string good = "test/\xc3\xa9l\xc3\xa8ve \xe2\x9c\x93 \xf0\x9f\x8c\xb3";
  EXPECT_NE(tensorboard::scalar_event(1.0, 3, good, 0.5f).find(good), std::string::npos);
  const std::string overlong =
      std::string("x") + '\xc0' + '\xaf' + '\xed' + '\xa0' + '\x80';  // '/' overlong, a surrogate
  EXPECT_NE(tensorboard::text_event(1.0, 0, "settings", overlong).find("x?????"), std::string::npos);
}

TEST(TensorBoard, AFileBeingWrittenHasANameTensorBoardDoesNotRead) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("htm-tb-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / tensorboard::event_file_name(1796467842.5, "host")).string();
  {
    tensorboard::EventFile file(path, 1796467842.5);
    file.write(tensorboard::scalar_event(1796467842.5, 1, "train/loss", 0.25f));
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      ++files;
      EXPECT_EQ(entry.path().filename().string().find("tfevents"), std::string::npos) << entry.path();
    }
    EXPECT_EQ(files, 1);
    file.close();
  }
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace htm
