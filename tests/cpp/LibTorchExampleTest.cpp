// The LibTorch example (examples/cpp) as users would run it: a program of its own that
// loads the plugin and calls the ops through the dispatcher with no Python.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

TEST(LibTorchExample, CallsEveryOpThroughTheDispatcher) {
  std::string command = std::string(TILE_EXAMPLE_BINARY) + " " + TILE_OPS_LIBRARY + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE *)> pipe(::popen(command.c_str(), "r"), ::pclose);
  ASSERT_TRUE(pipe) << command;
  std::string output;
  std::array<char, 256> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe.get()))
    output += buffer.data();
  int status = ::pclose(pipe.release());
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("all ops match ATen"), std::string::npos) << output;
  EXPECT_NE(output.find("bad shapes raise: tile::matmul: inner dimensions differ"), std::string::npos)
      << output;
}
