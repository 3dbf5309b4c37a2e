// tests/testing/test_main.cc — GoogleTest entry point shared by every suite.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
