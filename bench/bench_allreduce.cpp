// all_reduce bus bandwidth, rune::distributed::all_reduce (rank-order, deterministic) against
// MPI_Allreduce (MPI's own algorithm and order), float32 sum, 4 KiB .. 256 MiB, in one run:
//   mpirun -np 2 build/bench/bench_allreduce [max MiB]
// Bus bandwidth, as nccl-tests defines it: bytes * 2 (W - 1) / W / time. rune's time includes
// what its API does around the messages: the one-op program whose host step runs the collective
// over the tensor's memory (distributed/collective_fn.h) and the result's allocation.
// C bindings only (Open MPI's mpi.h pulls in its C++ bindings from C++ otherwise).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/nx.h"
#include "distributed/collectives.h"

namespace dist = rune::distributed;

namespace {
// Seconds per call: the median of `reps` timed calls (after one warm-up), the same on every rank
// (each rank's time maxed over ranks).
template <class F>
double time_call(F&& f, int reps) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double worst = 0;
    MPI_Allreduce(&s, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.push_back(worst);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  dist::Communicator comm = dist::init();
  const int w = comm.size();
  const double max_mib = argc > 1 ? std::atof(argv[1]) : 256;
  if (comm.rank() == 0)
    std::printf("%d ranks; float32 sum; bus bandwidth GB/s (median time)\n%12s %22s %22s\n", w,
                "bytes", "rune all_reduce", "MPI_Allreduce");
  for (size_t bytes = 4096; bytes <= static_cast<size_t>(max_mib * 1048576); bytes *= 4) {
    const int64_t n = static_cast<int64_t>(bytes / 4);
    nx::Tensor x = nx::full(nx::float32, {n}, 1.0 + comm.rank());
    std::vector<float> in(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
    const int reps = bytes <= (1u << 20) ? 50 : bytes <= (16u << 20) ? 10 : 3;
    double t_rune = time_call([&] { nx::wait(dist::all_reduce(comm, x)); }, reps);
    double t_mpi = time_call(
        [&] {
          MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        },
        reps);
    auto bus = [&](double s) { return static_cast<double>(bytes) * 2.0 * (w - 1) / w / s / 1e9; };
    if (comm.rank() == 0)
      std::printf("%12zu %10.2f (%8.1f us) %10.2f (%8.1f us)\n", bytes, bus(t_rune), t_rune * 1e6,
                  bus(t_mpi), t_mpi * 1e6);
  }
}
