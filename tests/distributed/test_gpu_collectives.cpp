// NCCL / RCCL loading (distributed/gpu/gpu_collectives.h): resolution on this machine, and the
// messages where a library is absent or is not a collective library, or fails to make a
// communicator. No GPU needed (the fake NCCL's tests: test_nccl_collectives.cpp).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "distributed/communicator.h"
#include "distributed/gpu/gpu_collectives.h"
#include "distributed/gpu/gpu_communicator.h"
#include "gpu_runtime/fake_driver.h"

namespace dist = rune::distributed;

TEST(GpuCollectives, NcclResolvesWhereInstalled) {
  if (!std::filesystem::exists("/usr/local/cuda/lib64/libnccl.so.2"))
    GTEST_SKIP() << "no libnccl under /usr/local/cuda/lib64";
  const auto& lib = dist::gpu_collective_library(dist::GpuCollectives::Nccl);
  ASSERT_EQ(lib.error, "");
  EXPECT_NE(lib.all_reduce, nullptr);
  int v = dist::gpu_collective_version(dist::GpuCollectives::Nccl);
  EXPECT_GE(v, 20000) << v;  // NCCL 2.x encodes 2.x.y as 2xxyy
}

TEST(GpuCollectives, AMissingFileIsNamed) {
  auto lib =
      dist::load_gpu_collective_library(dist::GpuCollectives::Rccl, "/nonexistent/librccl.so.1");
  EXPECT_NE(lib.error.find("RCCL is not available; tried:\n  /nonexistent/librccl.so.1: "),
            std::string::npos)
      << lib.error;
  EXPECT_EQ(lib.all_reduce, nullptr);
}

TEST(GpuCollectives, ALibraryWithoutTheSymbolsIsNamed) {
  auto lib = dist::load_gpu_collective_library(dist::GpuCollectives::Nccl, "libz.so.1");
  EXPECT_NE(lib.error.find("NCCL library libz.so.1 is unusable: symbol ncclGetVersion not found in "
                           "libz.so.1"),
            std::string::npos)
      << lib.error;
}

TEST(GpuCollectives, AbsentRcclRaisesClearly) {
  const auto& lib = dist::gpu_collective_library(dist::GpuCollectives::Rccl);
  if (lib.error.empty()) GTEST_SKIP() << "RCCL is installed here: " << lib.name;
  try {
    dist::gpu_collective_version(dist::GpuCollectives::Rccl);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::distributed::gpu_collective_version: RCCL is not "
                                         "available; tried:"),
              std::string::npos)
        << e.what();
  }
}

// ncclGetUniqueId needs no GPU or driver (it describes the bootstrap listener of the future rank
// 0), so it runs here; ncclCommInitRank and the collectives need a device and are not called.
TEST(GpuCollectives, AUniqueIdWithoutADriver) {
  if (!dist::gpu_collective_library(dist::GpuCollectives::Nccl).error.empty())
    GTEST_SKIP() << "NCCL is not installed";
  dist::GpuUniqueId id = dist::gpu_collective_unique_id(dist::GpuCollectives::Nccl);
  EXPECT_NE(id, dist::GpuUniqueId{});  // not all zero
}

TEST(GpuCollectives, AUniqueIdFromAnAbsentLibraryIsNamed) {
  if (dist::gpu_collective_library(dist::GpuCollectives::Rccl).error.empty())
    GTEST_SKIP() << "RCCL is installed here";
  try {
    dist::gpu_collective_unique_id(dist::GpuCollectives::Rccl);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::distributed::gpu_collective_unique_id: RCCL is not "
                                         "available; tried:"),
              std::string::npos)
        << e.what();
  }
}

// With the fake CUDA driver as CUDA:0 (a device, but no libcuda), the real libnccl fails when it
// makes the communicator; the error names the call, the device, the library and NCCL's reason
// (here: "unhandled cuda error (...) (1): Cuda failure 'CUDA driver version is insufficient for
// CUDA runtime version'").
TEST(GpuCollectives, RealNcclWithoutADriverFailsClearlyAtInit) {
  const auto& lib = dist::gpu_collective_library(dist::GpuCollectives::Nccl);
  if (!lib.error.empty()) GTEST_SKIP() << "NCCL is not installed";
  if (dlopen("libcuda.so.1", RTLD_LAZY)) GTEST_SKIP() << "a CUDA driver is here: NCCL may work";
  fake_gpu::install_fake_cuda_unless_hooked();
  try {
    dist::gpu_communicators({nx::Device::parse("CUDA:0", "test")});
    FAIL() << "ncclCommInitAll worked without a driver";
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::distributed::gpu_communicators: ncclCommInitAll(1 "
                                         "devices) failed on CUDA:0 (" +
                                         lib.name + "): "),
              std::string::npos)
        << e.what();
  }
}

TEST(GpuCollectives, HipDevicesWithoutRcclAreNamed) {
  if (dist::gpu_collective_library(dist::GpuCollectives::Rccl).error.empty())
    GTEST_SKIP() << "RCCL is installed here";
  try {
    dist::gpu_communicators({nx::Device::parse("HIP:0", "test")});
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::distributed::gpu_communicators: collectives on "
                                         "HIP:0 need RCCL: RCCL is not available; tried:"),
              std::string::npos)
        << e.what();
  }
}
