// htm_tests' main: GoogleTest's, then out by _Exit as htm's own main (core/app/main.cpp says
// why): each of the suite's GoogleTest processes skips libtorch's static destructors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int code = RUN_ALL_TESTS();
  std::fflush(nullptr);
  std::_Exit(code);
}
