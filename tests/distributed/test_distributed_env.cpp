// rune::distributed::init's launch variables: RUNE_WORLD_SIZE and RUNE_RANK out of range or not
// integers raise naming the variable, its value and the accepted range (a huge world size gave a
// bare "cannot create std::vector larger than max_size()", and 4294967298 wrapped to a world of
// 2). A refused init leaves no world behind, so each case calls it again.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "distributed/communicator.h"
#include "distributed/gpu/gpu_communicator.h"

namespace {

namespace dist = rune::distributed;

// init()'s message with the rendezvous variables set to `size` and `rank` (no MPI launcher).
std::string init_error(const char* size, const char* rank) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) ::unsetenv(v);
  ::setenv("RUNE_MASTER_ADDR", "127.0.0.1:1", 1);
  ::setenv("RUNE_DISTRIBUTED_TIMEOUT", "1", 1);
  ::setenv("RUNE_WORLD_SIZE", size, 1);
  ::setenv("RUNE_RANK", rank, 1);
  try {
    dist::init();
  } catch (const dist::distributed_error& e) {
    return e.what();
  }
  return "<init returned>";
}

TEST(DistributedEnv, WorldSizeAndRankOutOfRangeAreNamed) {
  const std::string size_range =
      "it must be an integer in [1, 1048576] (the number of ranks of the world)";
  const std::string rank_range =
      "it must be an integer in [0, 1048575] (this process's rank, below RUNE_WORLD_SIZE)";
  const std::string api = "rune::distributed::init: ";
  EXPECT_EQ(init_error("3000000000", "0"),
            api + "RUNE_WORLD_SIZE='3000000000' is out of range: " + size_range);
  EXPECT_EQ(init_error("4294967298", "0"),
            api + "RUNE_WORLD_SIZE='4294967298' is out of range: " + size_range);
  EXPECT_EQ(init_error("99999999999999999999", "0"),
            api + "RUNE_WORLD_SIZE='99999999999999999999' is out of range: " + size_range);
  EXPECT_EQ(init_error("0", "0"), api + "RUNE_WORLD_SIZE='0' is out of range: " + size_range);
  EXPECT_EQ(init_error("2x", "0"), api + "RUNE_WORLD_SIZE='2x' is not an integer: " + size_range);
  EXPECT_EQ(init_error("2", "-1"), api + "RUNE_RANK='-1' is out of range: " + rank_range);
  EXPECT_EQ(init_error("2", "4294967296"),
            api + "RUNE_RANK='4294967296' is out of range: " + rank_range);
  EXPECT_EQ(init_error("2", "2"),
            api + "RUNE_RANK=2 is not a rank of a world of RUNE_WORLD_SIZE=2 (ranks are 0 to 1)");
}

// The timeout is read at each init too (ir::env::value_now), its default written once (ir/env.def).
TEST(DistributedEnv, ATimeoutThatIsNotAPositiveNumberIsNamed) {
  for (const char* bad : {"soon", "0", "-1", "5s"}) {
    ::setenv("RUNE_DISTRIBUTED_TIMEOUT", bad, 1);
    try {
      dist::init();
      ADD_FAILURE() << "init returned with RUNE_DISTRIBUTED_TIMEOUT=" << bad;
    } catch (const dist::distributed_error& e) {
      EXPECT_EQ(std::string(e.what()), std::string("rune::distributed::init: "
                                                   "RUNE_DISTRIBUTED_TIMEOUT='") +
                                           bad + "' is not a positive number of seconds");
    }
  }
  ::unsetenv("RUNE_DISTRIBUTED_TIMEOUT");
}

// RUNE_NCCL_NATIVE is 0 or 1 (docs/env.md); any other value raised nothing and meant 0.
TEST(DistributedEnv, NcclNativeIsZeroOrOne) {
  ::setenv("RUNE_NCCL_NATIVE", "yes", 1);
  try {
    dist::native_gpu_reductions();
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "RUNE_NCCL_NATIVE=\"yes\" is not a whole number (expected 0 or 1; unset means 0)");
  }
}

}  // namespace
