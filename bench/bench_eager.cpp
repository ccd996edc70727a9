// Issue 2: the cost of eager ops. (a) y = x * 2 + 1 on 16M float32 (two eager ops) against a
// STREAM-like copy of the same array, goal within 1.5x; (b) a cached eager op on 3 elements.
#include <cstdio>
#include <exception>
#include <vector>

#include "bench/common.h"
#include "bench/reference.h"
#include "trace/rune.h"

namespace {

constexpr int64_t kBig = int64_t{1} << 24;  // 16M elements, 64 MiB per float32 array

double checksum(const nx::Tensor& t) {
  double s = 0;
  for (float v : nx::to_vector<float>(t)) s += v;
  return s;
}

void big(bench::Report& r) {
  bench::AlignedFloats src(kBig, 1.5f), dst(kBig);
  int threads = bench::reference_threads();
  auto copy = [&] { bench::copy_kernel(src.data(), dst.data(), kBig, threads); };
  try {
    nx::Tensor x = nx::rand(nx::key(0), nx::float32, {kBig});
    nx::Tensor y, z;
    auto [affine_us, mul_us, copy_us] = bench::medians_us(
        25, 3, [&] { y = x * 2.0 + 1.0; }, [&] { z = x * 2.0; }, copy);
    r.add("eager_affine_16M", affine_us, "copy", copy_us, 1.5);
    // One op alone shows what each of the two passes costs against the copy.
    r.add("eager_one_op_16M", mul_us, "copy", copy_us);
    char buf[96];
    std::snprintf(buf, sizeof buf, "sum(x*2+1) = %.6g, sum(x*2) = %.6g, copy threads = %d",
                  checksum(y), checksum(z), threads);
    r.note("eager_16M_check", buf);
  } catch (const std::exception& e) {
    r.skip("eager_affine_16M", e.what(), "copy", bench::medians_us(25, 3, copy)[0],
           "rune/ref <= 1.5x");
  }
}

void tiny(bench::Report& r) {
  const float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  auto ref = [&] { delete[] bench::add_alloc(a, b, 3); };
  try {
    nx::Tensor x = nx::create(nx::float32, {3}, {1, 2, 3});
    nx::Tensor y = nx::create(nx::float32, {3}, {4, 5, 6});
    nx::Tensor z;
    auto [op_us, ref_us] = bench::per_call_us(
        30, 10000, [&] { z = x + y; }, ref);
    r.add("eager_op_3", op_us, "new+add", ref_us);
    auto v = nx::to_vector<float>(z);
    char buf[64];
    std::snprintf(buf, sizeof buf, "x + y = [%g, %g, %g]", v[0], v[1], v[2]);
    r.note("eager_op_3_check", buf);
  } catch (const std::exception& e) {
    r.skip("eager_op_3", e.what(), "new+add", bench::per_call_us(30, 10000, ref)[0]);
  }
}

}  // namespace

int main() {
  bench::Report r("eager");
  big(r);
  tiny(r);
  r.print_json();
}
