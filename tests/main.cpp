// htm_tests' main: GoogleTest's, then out as htm's own processes leave (htm::leave,
// process/worker_fork.h): each of the suite's GoogleTest processes skips libtorch's static destructors.
#include <gtest/gtest.h>

#include "process/worker_fork.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  htm::leave(RUN_ALL_TESTS());
}
