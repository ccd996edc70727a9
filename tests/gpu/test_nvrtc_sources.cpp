// Every kernel shape the suite produces renders as CUDA C that NVRTC compiles (sm_80 and sm_90),
// without a GPU. Kernels come from real nx programs traced and scheduled as rune::jit does, then
// decomposed as codegen/compile.cpp does. A failure prints the source and NVRTC's log.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "codegen/c_renderer.h"
#include "codegen/cuda/gpu_source_check.h"
#include "codegen/cuda/nvrtc.h"
#include "gpu_test_util.h"

namespace {

using namespace gpu_test;

// Compiles every kernel (distinct renderings once) with NVRTC for each checked arch. Kernels
// are compiled in batches, several per NVRTC program (each under its own name), which divides
// NVRTC's fixed cost per program; a failing batch is recompiled kernel by kernel so the message
// shows the one kernel's source and log.
struct Result {
  size_t kernels = 0, distinct = 0, compiles = 0;
  double seconds = 0;
  std::vector<std::string> failures;
};

constexpr size_t kBatch = 12;

Result compile_all(const std::vector<Labelled>& ks) {
  Result res;
  auto t0 = std::chrono::steady_clock::now();
  const auto& d = codegen::cuda_dialect();
  std::vector<size_t> distinct;  // index of the first kernel of each distinct rendering
  std::set<std::string> seen;
  for (size_t i = 0; i < ks.size(); ++i) {
    try {
      if (seen.insert(codegen::render_c_kernel(ks[i].k, "rk", d)).second) distinct.push_back(i);
    } catch (const std::exception& e) {
      res.failures.push_back(ks[i].label + ": render_c threw: " + e.what());
    }
  }
  res.kernels = ks.size();
  res.distinct = distinct.size();
  std::atomic<size_t> next{0};
  std::mutex mu;
  auto compile = [&](const std::string& src, const char* arch) {
    {
      std::lock_guard lock(mu);
      ++res.compiles;
    }
    codegen::cuda::nvrtc_compile(src, arch);
  };
  auto worker = [&] {
    for (size_t b; (b = next++ * kBatch) < distinct.size();) {
      size_t e = std::min(distinct.size(), b + kBatch);
      std::string src = codegen::render_c_prelude(d);
      for (size_t j = b; j < e; ++j)
        src += codegen::render_c_kernel(ks[distinct[j]].k, "rk" + std::to_string(j), d);
      for (const char* arch : codegen::kCheckArchs) {
        try {
          compile(src, arch);
        } catch (const std::exception&) {
          for (size_t j = b; j < e; ++j) {
            try {
              compile(codegen::render_c(ks[distinct[j]].k, "rk", d), arch);
            } catch (const std::exception& ex) {
              std::lock_guard lock(mu);
              res.failures.push_back(ks[distinct[j]].label + ": " + ex.what());
            }
          }
        }
      }
    }
  };
  unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::atomic<size_t> g_compiles{0};
std::atomic<size_t> g_kernels{0};

void expect_all_compile(const std::vector<Labelled>& ks) {
  ASSERT_FALSE(ks.empty());
  Result r = compile_all(ks);
  g_compiles += r.compiles;
  g_kernels += r.kernels;
  std::printf("  %zu kernels, %zu distinct, %zu NVRTC programs (%zu archs) in %.2f s\n", r.kernels,
              r.distinct, r.compiles, std::size(codegen::kCheckArchs), r.seconds);
  for (size_t i = 0; i < r.failures.size() && i < 3; ++i) ADD_FAILURE() << r.failures[i];
  EXPECT_TRUE(r.failures.empty()) << r.failures.size() << " kernels failed to compile";
}

class Nvrtc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::cuda::nvrtc_available())
      GTEST_SKIP() << "libnvrtc not available: " << codegen::cuda::nvrtc_load_error();
  }
};

bool float_only(Op op) {
  return op == Op::Sqrt || op == Op::Exp || op == Op::Log || op == Op::Sin || op == Op::Cos ||
         op == Op::Tan || op == Op::Tanh || op == Op::Pow || op == Op::Atan2;
}
bool bits_only(Op op) {
  return op == Op::Not || op == Op::And || op == Op::Or || op == Op::Xor || op == Op::Shl ||
         op == Op::Shr;
}
bool valid_for(Op op, DType t) {
  if (float_only(op)) return ir::is_float(t);
  if (bits_only(op)) return !ir::is_float(t);
  return true;
}

// ---------------------------------------------------------------------------------------------

TEST_F(Nvrtc, EveryElementwisePrimitiveAndDtype) {
  std::vector<Labelled> ks;
  const Op unary[] = {Op::Neg,  Op::Abs,   Op::Sqrt, Op::Floor,
                      Op::Ceil, Op::Round, Op::Not,  Op::IsNan};
  const Op binary[] = {Op::Add, Op::Sub,   Op::Mul,   Op::Div,   Op::Mod,   Op::Max,
                       Op::Min, Op::CmpLt, Op::CmpLe, Op::CmpEq, Op::CmpNe, Op::And,
                       Op::Or,  Op::Xor,   Op::Shl,   Op::Shr};
  for (DType t : kAll) {
    for (Op op : unary) {
      if (!valid_for(op, t)) continue;
      DType out = op == Op::IsNan ? DType::Bool : t;
      add_program(ks, std::string(ir::op_name(op)) + " " + dname(t), {{t, {5, 7}}},
                  [&](auto& a) { return std::vector<Tensor>{prim(op, out, {a[0]})}; });
    }
    for (Op op : binary) {
      if (!valid_for(op, t)) continue;
      bool cmp = op == Op::CmpLt || op == Op::CmpLe || op == Op::CmpEq || op == Op::CmpNe;
      DType out = cmp ? DType::Bool : t;
      add_program(ks, std::string(ir::op_name(op)) + " " + dname(t), {{t, {5, 7}}, {t, {5, 7}}},
                  [&](auto& a) {
                    return std::vector<Tensor>{prim(op, out, {a[0], a[1]})};
                  });
    }
    // where, with a broadcast operand and a constant.
    add_program(ks, "Where " + dname(t), {{DType::Bool, {4, 6}}, {t, {4, 6}}, {t, {6}}},
                [&](auto& a) {
                  return std::vector<Tensor>{nx::where(a[0], a[1], nx::broadcast_to(a[2], {4, 6}))};
                });
  }
  // Bitcasts between same-size types.
  const std::pair<DType, DType> bitcasts[] = {
      {DType::Float32, DType::Int32},    {DType::Int32, DType::Float32},
      {DType::Float64, DType::Int64},    {DType::Int64, DType::Float64},
      {DType::Float16, DType::BFloat16}, {DType::BFloat16, DType::Float16}};
  for (auto [from, to] : bitcasts)
    add_program(ks, "Bitcast " + dname(from) + "->" + dname(to), {{from, {9}}},
                [&](auto& a) { return std::vector<Tensor>{prim(Op::Bitcast, to, {a[0]})}; });
  // 0-d and empty shapes.
  add_program(ks, "add 0-d", {{DType::Float32, {}}, {DType::Float32, {}}},
              [](auto& a) { return std::vector<Tensor>{nx::add(a[0], a[1])}; });
  add_program(ks, "mul empty", {{DType::Int32, {0, 3}}, {DType::Int32, {0, 3}}},
              [](auto& a) { return std::vector<Tensor>{nx::mul(a[0], a[1])}; });
  // User ops composed of several primitives, fused.
  for (DType t : kFloats) {
    add_program(ks, "composite " + dname(t), {{t, {3, 4}}, {t, {4}}}, [](auto& a) {
      Tensor b = nx::broadcast_to(a[1], {3, 4});
      return std::vector<Tensor>{
          nx::clip(nx::sign(a[0]) * nx::square(b) - nx::reciprocal(a[0]), -2, 2),
          nx::relu(a[0] / b + 1.5), nx::isnan(a[0] - b)};
    });
  }
  expect_all_compile(ks);
}

TEST_F(Nvrtc, CastsBetweenAllDtypePairs) {
  std::vector<Labelled> ks;
  for (DType from : kAll)
    for (DType to : kAll)
      add_program(ks, "cast " + dname(from) + "->" + dname(to), {{from, {3, 5}}},
                  [&](auto& a) { return std::vector<Tensor>{nx::cast(a[0], to)}; });
  expect_all_compile(ks);
}

TEST_F(Nvrtc, Reductions) {
  std::vector<Labelled> ks;
  const Op reduce_ops[] = {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd};
  // Raw reduction primitives on every dtype: small, one block, several blocks (> 65536).
  const Shape shapes[] = {{3, 7}, {2, 65536}, {2, 200000}};
  for (DType t : kAll)
    for (Op op : reduce_ops)
      for (const Shape& s : shapes) {
        Shape kept = s;
        kept[1] = 1;
        add_program(
            ks, std::string(ir::op_name(op)) + " " + dname(t) + " " + ir::to_string(s), {{t, s}},
            [&](auto& a) {
              return std::vector<Tensor>{nx::apply(op, t, kept, {a[0]}, std::vector<int64_t>{1})};
            });
      }
  // User reductions: all axes, multi-axis, keepdims, fused producers and consumers.
  for (DType t : {DType::Float32, DType::Float16, DType::Int32, DType::Bool}) {
    add_program(ks, "sum all " + dname(t), {{t, {300, 500}}},
                [](auto& a) { return std::vector<Tensor>{nx::sum(a[0])}; });
    add_program(ks, "max axes 0,2 " + dname(t), {{t, {4, 5, 6}}}, [](auto& a) {
      return std::vector<Tensor>{nx::max(a[0], {0, 2})};
    });
    add_program(ks, "prod axis 1 keepdims " + dname(t), {{t, {4, 5, 6}}},
                [](auto& a) { return std::vector<Tensor>{nx::prod(a[0], {1}, true)}; });
    add_program(ks, "min transposed " + dname(t), {{t, {70, 1100}}},
                [](auto& a) { return std::vector<Tensor>{nx::min(nx::transpose(a[0]), {1})}; });
  }
  for (DType t : kFloats) {
    add_program(ks, "mean big " + dname(t), {{t, {3, 100000}}},
                [](auto& a) { return std::vector<Tensor>{nx::mean(a[0], {1})}; });
    add_program(ks, "softmax " + dname(t), {{t, {8, 33}}},
                [](auto& a) { return std::vector<Tensor>{nx::softmax(a[0])}; });
    add_program(ks, "logsumexp " + dname(t), {{t, {8, 33}}},
                [](auto& a) { return std::vector<Tensor>{nx::logsumexp(a[0], {1})}; });
    add_program(ks, "argmax " + dname(t), {{t, {8, 33}}},
                [](auto& a) { return std::vector<Tensor>{nx::argmax(a[0], 1)}; });
    add_program(ks, "sum of squares multi-axis " + dname(t), {{t, {6, 300, 400}}}, [](auto& a) {
      return std::vector<Tensor>{nx::sum(nx::square(a[0]), {1, 2})};
    });
  }
  add_program(ks, "matmul", {{DType::Float32, {16, 32}}, {DType::Float32, {32, 8}}},
              [](auto& a) { return std::vector<Tensor>{nx::matmul(a[0], a[1])}; });
  add_program(ks, "empty sum", {{DType::Float32, {4, 0}}},
              [](auto& a) { return std::vector<Tensor>{nx::sum(a[0], {1})}; });
  expect_all_compile(ks);
}

TEST_F(Nvrtc, Movement) {
  std::vector<Labelled> ks;
  for (DType t : kAll) {
    add_program(ks, "transpose " + dname(t), {{t, {3, 4, 5}}}, [](auto& a) {
      return std::vector<Tensor>{nx::contiguous(nx::permute(a[0], {2, 0, 1}))};
    });
    add_program(ks, "slice " + dname(t), {{t, {10, 12}}}, [](auto& a) {
      return std::vector<Tensor>{
          nx::contiguous(nx::slice(a[0], {{1, 9, 2}, {std::nullopt, std::nullopt, -3}}))};
    });
    add_program(ks, "pad " + dname(t), {{t, {4, 5}}}, [](auto& a) {
      return std::vector<Tensor>{nx::pad(a[0], {{1, 2}, {0, 3}}, 0)};
    });
    add_program(ks, "pad value " + dname(t), {{t, {4, 5}}}, [](auto& a) {
      return std::vector<Tensor>{nx::pad(a[0], {{2, 0}, {1, 1}}, 1)};
    });
    add_program(ks, "flip " + dname(t), {{t, {4, 5}}},
                [](auto& a) { return std::vector<Tensor>{nx::contiguous(nx::flip(a[0], {1}))}; });
    add_program(ks, "broadcast " + dname(t), {{t, {1, 5}}}, [](auto& a) {
      return std::vector<Tensor>{nx::contiguous(nx::broadcast_to(a[0], {4, 3, 5}))};
    });
  }
  add_program(ks, "concatenate", {{DType::Float32, {2, 3}}, {DType::Float32, {4, 3}}}, [](auto& a) {
    return std::vector<Tensor>{nx::concatenate({a[0], a[1]}, 0)};
  });
  add_program(ks, "stack", {{DType::Int64, {2, 3}}, {DType::Int64, {2, 3}}}, [](auto& a) {
    return std::vector<Tensor>{nx::stack({a[0], a[1]}, 1)};
  });
  add_program(ks, "reshape of transpose", {{DType::Float32, {6, 4}}}, [](auto& a) {
    return std::vector<Tensor>{nx::reshape(nx::transpose(a[0]), {3, 8}) * 2.0};
  });
  add_program(ks, "iota", {{DType::Float32, {4, 6}}}, [](auto& a) {
    return std::vector<Tensor>{a[0] + nx::cast(nx::iota({4, 6}, 1), DType::Float32)};
  });
  expect_all_compile(ks);
}

TEST_F(Nvrtc, TranscendentalsDecomposed) {
  std::vector<Labelled> ks;
  for (DType t : kFloats) {
    for (Op op : {Op::Exp, Op::Log, Op::Sin, Op::Cos, Op::Tan, Op::Tanh})
      add_program(ks, std::string(ir::op_name(op)) + " " + dname(t), {{t, {33}}},
                  [&](auto& a) { return std::vector<Tensor>{prim(op, t, {a[0]})}; });
    for (Op op : {Op::Pow, Op::Atan2})
      add_program(ks, std::string(ir::op_name(op)) + " " + dname(t), {{t, {33}}, {t, {33}}},
                  [&](auto& a) {
                    return std::vector<Tensor>{prim(op, t, {a[0], a[1]})};
                  });
    add_program(ks, "sigmoid " + dname(t), {{t, {33}}},
                [](auto& a) { return std::vector<Tensor>{nx::sigmoid(a[0])}; });
    add_program(ks, "sum exp " + dname(t), {{t, {4, 70000}}},
                [](auto& a) { return std::vector<Tensor>{nx::sum(nx::exp(a[0]), {1})}; });
  }
  expect_all_compile(ks);
}

// ---------------------------------------------------------------------------------------------

TEST_F(Nvrtc, CompileErrorCarriesLogAndSource) {
  try {
    codegen::cuda::nvrtc_compile("extern \"C\" __global__ void k() { undeclared_thing(); }\n",
                                 "sm_90");
    FAIL() << "expected a compile error";
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("undeclared_thing"), std::string::npos) << m;
    EXPECT_NE(m.find("NVRTC log"), std::string::npos) << m;
    EXPECT_NE(m.find("source"), std::string::npos) << m;
  }
}

TEST_F(Nvrtc, CheckCudaSourceOnAScheduledKernel) {
  std::vector<Labelled> ks;
  add_program(ks, "sum", {{DType::Float32, {3, 70000}}},
              [](auto& a) { return std::vector<Tensor>{nx::sum(a[0], {1})}; });
  auto it =
      std::find_if(ks.begin(), ks.end(), [](const Labelled& l) { return l.k.rbody != nullptr; });
  ASSERT_NE(it, ks.end());
  const codegen::KernelSpec& k = it->k;
  ASSERT_GT(k.blocks(), 1);
  EXPECT_NO_THROW(codegen::check_cuda_source(k));
  // Two phases: the scratch buffer follows the kernel params.
  auto dt = codegen::c_param_dtypes(k);
  EXPECT_EQ(dt.size(), k.slots.size() + 1);
  std::string src = codegen::render_c(k, "my_kernel", codegen::cuda_dialect());
  EXPECT_NE(src.find("void my_kernel_p1("), std::string::npos);
  EXPECT_NE(src.find("void my_kernel("), std::string::npos);
}

TEST(NvrtcLoad, MessageNamesTheLibrary) {
  if (codegen::cuda::nvrtc_available()) {  // nothing to check but the version
    EXPECT_FALSE(codegen::cuda::nvrtc_version().empty());
    EXPECT_TRUE(codegen::cuda::nvrtc_load_error().empty());
    return;
  }
  try {
    codegen::cuda::nvrtc_compile("", "sm_90");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("libnvrtc"), std::string::npos) << e.what();
  }
}

}  // namespace
