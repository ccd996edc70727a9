// Internal helpers of rune::nn's sources (nn/init.cpp, nn/layers.cpp): how they raise and how
// they print numbers in messages. Not part of the public API.
#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>

namespace rune::nn::detail {

// std::invalid_argument "<api>: <message>".
[[noreturn]] inline void fail(const std::string& api, const std::string& message) {
  throw std::invalid_argument(api + ": " + message);
}

// A number as a message prints it (%g: 0.5, 1e-05).
inline std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace rune::nn::detail
