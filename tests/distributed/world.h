// The communicator every distributed test of a process shares: rune::distributed::init() runs
// once per process (MPI allows one initialisation), with a 20 s timeout so a lost rank fails the
// test instead of hanging it.
#pragma once

#include "distributed/collectives.h"

namespace rune_test {

inline rune::distributed::Communicator world() {
  static rune::distributed::Communicator c = [] {
    auto comm = rune::distributed::init();
    comm.set_timeout(20);
    return comm;
  }();
  return c;
}

}  // namespace rune_test
