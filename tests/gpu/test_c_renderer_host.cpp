// The C renderer's semantics, checked without a GPU: kernels rendered through a host dialect of
// the same renderer (only the dialect differs from CUDA), compiled by the host C++ compiler
// with contraction off, run on special values (inf, NaN, -0, subnormals, integer limits), and
// compared bit for bit with the same programs run eagerly (the LLVM backend, the reference);
// NaNs match any NaN.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "codegen/gpu/c_renderer.h"
#include "gpu_test_util.h"

namespace {

using namespace gpu_test;

const codegen::CDialect& host_dialect() {
  static const codegen::CDialect d = [] {
    codegen::CDialect c;
    c.name = "host-c (test)";
    c.prelude =
        "#include <math.h>\n#include <string.h>\n"
        "static inline unsigned h_f32_u32(float x) { unsigned u; memcpy(&u, &x, 4); return u; }\n"
        "static inline float h_u32_f32(unsigned u) { float x; memcpy(&x, &u, 4); return x; }\n"
        "static inline long long h_f64_i64(double x) { long long u; memcpy(&u, &x, 8); return u; "
        "}\n"
        "static inline double h_i64_f64(long long u) { double x; memcpy(&x, &u, 8); return x; }\n";
    c.kernel_qualifier = "extern \"C\"";
    c.device_fn = "static inline";
    c.restrict_kw = "__restrict__";
    c.thread_id = "0ull";
    c.thread_stride = "1ull";
    c.sqrt_f32 = "sqrtf";
    c.sqrt_f64 = "sqrt";
    c.f32_as_u32 = "h_f32_u32";
    c.u32_as_f32 = "h_u32_f32";
    c.f64_as_u64 = "h_f64_i64";
    c.u64_as_f64 = "h_i64_f64";
    return c;
  }();
  return d;
}

// Special values per dtype, as bit patterns.
std::vector<uint64_t> specials(DType t) {
  std::vector<uint64_t> v;
  auto f32 = [&](float x) { v.push_back(std::bit_cast<uint32_t>(x)); };
  auto f64 = [&](double x) { v.push_back(std::bit_cast<uint64_t>(x)); };
  const double base[] = {0.0,   -0.0, 1.0,  -1.0,    0.5,     -1.5, 2.5,  3.0,          -7.25,
                         100.0, 0.1,  1e-3, 65504.0, 70000.0, 1e10, -3e9, 2147483647.0, 3e38};
  const float inf = std::numeric_limits<float>::infinity();
  switch (t) {
    case DType::Bool:
      return {0, 1};
    case DType::UInt8:
      return {0, 1, 2, 3, 7, 8, 31, 127, 128, 200, 255};
    case DType::Int32:
      for (int64_t x : {0LL, 1LL, -1LL, 2LL, -3LL, 7LL, -7LL, 31LL, 32LL, 33LL, 255LL, 100000LL,
                        (long long)INT32_MAX, (long long)INT32_MIN})
        v.push_back(static_cast<uint32_t>(x));
      return v;
    case DType::Int64:
      for (int64_t x :
           {(int64_t)0, (int64_t)1, (int64_t)-1, (int64_t)2, (int64_t)-3, (int64_t)7, (int64_t)-7,
            (int64_t)63, (int64_t)64, (int64_t)65, (int64_t)1 << 40, INT64_MAX, INT64_MIN})
        v.push_back(static_cast<uint64_t>(x));
      return v;
    // The integer dtypes of issue 18: both ends, -1, and the shift amounts around the width.
    case DType::Int8:
    case DType::Int16:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: {
      const int w = ir::int_bits(t);
      const uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
      for (uint64_t x : std::initializer_list<uint64_t>{0, 1, 2, 3, 7, uint64_t(w - 1), uint64_t(w),
                                                        uint64_t(w + 1), 100, mask, mask - 1,
                                                        mask >> 1, (mask >> 1) + 1})
        v.push_back(x & mask);
      return v;
    }
    case DType::Float32:
      for (double x : base) f32(static_cast<float>(x));
      f32(inf), f32(-inf), f32(std::nanf("")), f32(1e-40f), f32(-1e-45f), f32(6e-8f);
      return v;
    case DType::Float64:
      for (double x : base) f64(x);
      f64(1e300), f64(-1e-310), f64(HUGE_VAL), f64(-HUGE_VAL), f64(std::nan("")), f64(9.3e18);
      return v;
    case DType::Float16:
    case DType::BFloat16: {
      for (double x : base) {
        ir::Value val = ir::Value::of_float(t, x);
        v.push_back(val.bits());
      }
      uint64_t q = t == DType::Float16 ? 0x7e00 : 0x7fc0,
               in = t == DType::Float16 ? 0x7c00 : 0x7f80;
      v.push_back(q), v.push_back(in), v.push_back(in | 0x8000), v.push_back(0x0001),
          v.push_back(0x8003);
      return v;
    }
  }
  return v;
}

struct Case {
  std::string label;
  std::vector<Arg> args;
  Fn fn;
  bool finite = false;  // only moderate finite specials (order-sensitive sums stay finite)
};

struct Bytes {
  DType t;
  std::vector<char> b;
};

std::vector<Bytes> make_inputs(const Case& c) {
  std::vector<Bytes> ins;
  for (size_t a = 0; a < c.args.size(); ++a) {
    DType t = c.args[a].t;
    int64_t n = ir::numel(c.args[a].shape), isz = ir::itemsize(t);
    auto sp = specials(t);
    if (c.finite && ir::is_float(t)) {
      std::vector<uint64_t> keep;
      for (auto b : sp) {
        double v = ir::Value::from_bits(t, b).f;
        if (std::isfinite(v) && std::abs(v) < 1e12) keep.push_back(b);
      }
      sp = keep;
    }
    Bytes bytes{t, std::vector<char>(n * isz)};
    for (int64_t i = 0; i < n; ++i) {
      // Arg 0 walks slowly and arg 1 quickly, so a square grid sees all pairs.
      size_t j =
          a == 0 && c.args.size() >= 2 ? (i / 17) % sp.size() : (i * (a + 1) + a) % sp.size();
      if (a == 1) j = i % sp.size();
      std::memcpy(bytes.b.data() + i * isz, &sp[j], isz);
    }
    ins.push_back(std::move(bytes));
  }
  return ins;
}

std::vector<char> read_bits(const Tensor& x) {
  nx::to_array(x);  // waits for the value
  const auto& im = x.impl();
  int64_t isz = ir::itemsize(im.dtype), n = x.size();
  std::vector<char> out(n * isz);
  std::vector<int64_t> idx(x.ndim(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = im.view.offset;
    for (int d = 0; d < x.ndim(); ++d) off += idx[d] * im.view.strides[d];
    std::memcpy(out.data() + k * isz, static_cast<const char*>(im.buffer->data) + off * isz, isz);
    for (int d = x.ndim() - 1; d >= 0; --d) {
      if (++idx[d] < im.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

struct Traced {
  codegen::Schedule s;
  std::vector<DType> out_dtypes;
};
Traced trace(const Case& c) {
  rune::Tracer tr(nx::Device::cpu(), static_cast<int>(c.args.size()));
  std::vector<ir::NodeRef> roots;
  {
    nx::InterpreterScope scope(&tr);
    std::vector<Tensor> ins;
    for (size_t i = 0; i < c.args.size(); ++i)
      ins.push_back(
          tr.stand_in(static_cast<int>(i), c.args[i].t, ir::View::contiguous(c.args[i].shape)));
    for (const auto& r : c.fn(ins)) roots.push_back(tr.node_of(r));
  }
  if (!tr.captured().empty()) throw std::logic_error(c.label + ": captures a tensor");
  Traced t{codegen::schedule(roots, static_cast<int>(c.args.size())), {}};
  for (auto r : roots) t.out_dtypes.push_back(r->dtype);
  for (auto& k : t.s.kernels) {
    for (ir::NodeRef* r : k.roots()) *r = codegen::decompose(*r);
  }
  return t;
}

using P = void*;
void call(void* fn, std::vector<P> p, long long n) {
  switch (p.size()) {
    case 1:
      return reinterpret_cast<void (*)(P, long long)>(fn)(p[0], n);
    case 2:
      return reinterpret_cast<void (*)(P, P, long long)>(fn)(p[0], p[1], n);
    case 3:
      return reinterpret_cast<void (*)(P, P, P, long long)>(fn)(p[0], p[1], p[2], n);
    case 4:
      return reinterpret_cast<void (*)(P, P, P, P, long long)>(fn)(p[0], p[1], p[2], p[3], n);
    case 5:
      return reinterpret_cast<void (*)(P, P, P, P, P, long long)>(fn)(p[0], p[1], p[2], p[3], p[4],
                                                                      n);
    case 6:
      return reinterpret_cast<void (*)(P, P, P, P, P, P, long long)>(fn)(p[0], p[1], p[2], p[3],
                                                                         p[4], p[5], n);
    default:
      throw std::logic_error("too many params");
  }
}

std::string hex(const char* p, int64_t isz) {
  uint64_t v = 0;
  std::memcpy(&v, p, isz);
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", static_cast<int>(isz * 2),
                static_cast<unsigned long long>(v));
  return buf;
}

// NaN payloads and signs are not semantics: which operand's NaN an add returns depends on
// operand order the compilers may commute, and GPUs return a canonical NaN.
bool both_nan(DType t, const char* a, const char* b) {
  if (!ir::is_float(t)) return false;
  uint64_t x = 0, y = 0;
  std::memcpy(&x, a, ir::itemsize(t));
  std::memcpy(&y, b, ir::itemsize(t));
  return std::isnan(ir::Value::from_bits(t, x).f) && std::isnan(ir::Value::from_bits(t, y).f);
}

// Renders all cases into one library, runs each and compares with eager.
void run_cases(const std::vector<Case>& cases) {
  const char* cxx = std::getenv("CXX");
  std::string compiler = cxx && *cxx ? cxx : "c++";
  if (std::system((compiler + " --version >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "no host C++ compiler (" << compiler << ")";
  std::vector<Traced> traced;
  // The device this dialect runs on: one thread, so no lane exchange, vectors or blocks.
  codegen::DeviceDesc one_thread;
  one_thread.gpu = true;
  std::string src = codegen::render_c_prelude(host_dialect());
  int nk = 0;
  for (const auto& c : cases) {
    traced.push_back(trace(c));
    for (const auto& k : traced.back().s.kernels)
      src += codegen::render_c_kernel(k, "rk" + std::to_string(nk++), host_dialect(), one_thread);
  }
  char dir[] = "/tmp/rune_c_host_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string base = std::string(dir) + "/k";
  std::ofstream(base + ".cpp") << src;
  // Contraction off and no fast math: the host's IEEE operations are the reference's.
  std::string cmd = compiler +
                    " -std=c++17 -O1 -ffp-contract=off -fno-fast-math -fPIC -shared -w -o " + base +
                    ".so " + base + ".cpp 2>" + base + ".log";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "host compile failed; see " << base << ".cpp and .log";
  void* lib = dlopen((base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  nk = 0;
  int mismatched_cases = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const auto& s = traced[ci].s;
    auto ins = make_inputs(c);
    // Rendered: every slot a host buffer; kernels in order.
    std::vector<std::vector<char>> slots(s.slots.size());
    for (size_t i = 0; i < s.slots.size(); ++i)
      slots[i] = static_cast<int>(i) < s.n_inputs
                     ? ins[i].b
                     : std::vector<char>(s.slots[i].numel * ir::itemsize(s.slots[i].dtype) + 1);
    for (const auto& k : s.kernels) {
      std::string name = "rk" + std::to_string(nk++);
      std::vector<P> ptrs;
      for (int sl : k.slots) ptrs.push_back(slots[sl].data());
      auto dts = codegen::c_param_dtypes(k);
      while (ptrs.size() + (k.rbody && k.blocks() > 1 ? 1 : 0) < dts.size())
        ptrs.push_back(nullptr);
      int64_t outs = ir::numel(k.shape);
      if (k.rbody && k.blocks() > 1) {
        std::vector<char> scratch(outs * k.blocks() * ir::itemsize(k.rbody->dtype) + 1);
        ptrs.push_back(scratch.data());
        call(dlsym(lib, (name + "_p1").c_str()), ptrs, outs * k.blocks());
        call(dlsym(lib, name.c_str()), ptrs, outs);
      } else {
        call(dlsym(lib, name.c_str()), ptrs, outs);
      }
    }
    // Eager (the LLVM backend).
    std::vector<Tensor> eins;
    for (size_t a = 0; a < c.args.size(); ++a)
      eins.push_back(nx::from_bytes(c.args[a].t, c.args[a].shape, ins[a].b.data()));
    auto eouts = c.fn(eins);
    for (size_t o = 0; o < eouts.size(); ++o) {
      auto want = read_bits(eouts[o]);
      const auto& got = slots[s.output_slots[o]];
      int64_t isz = ir::itemsize(eouts[o].dtype());
      int64_t n = eouts[o].size(), bad = 0;
      std::string first;
      for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(want.data() + i * isz, got.data() + i * isz, isz) != 0 &&
            !both_nan(eouts[o].dtype(), want.data() + i * isz, got.data() + i * isz)) {
          if (!bad++) {
            first = "element " + std::to_string(i) + ": eager " + hex(want.data() + i * isz, isz) +
                    ", C " + hex(got.data() + i * isz, isz) + "; inputs";
            for (size_t a = 0; a < ins.size(); ++a) {
              int64_t ai = std::min<int64_t>(i, ir::numel(c.args[a].shape) - 1);
              int64_t asz = ir::itemsize(ins[a].t);
              first += " " + hex(ins[a].b.data() + ai * asz, asz);
            }
          }
        }
      if (bad) {
        ++mismatched_cases;
        ADD_FAILURE() << c.label << " output " << o << ": " << bad << " of " << n
                      << " differ; first at " << first;
      }
    }
  }
  dlclose(lib);
  std::printf("  %zu programs, %d kernels\n", cases.size(), nk);
  EXPECT_EQ(mismatched_cases, 0) << "the rendered source is kept in " << base << ".cpp";
  if (mismatched_cases == 0) std::filesystem::remove_all(dir);
}

bool float_only(Op op) {
  return op == Op::Sqrt || op == Op::Exp || op == Op::Log || op == Op::Sin || op == Op::Cos ||
         op == Op::Tan || op == Op::Tanh || op == Op::Erf || op == Op::Pow || op == Op::Atan2;
}
bool bits_only(Op op) {
  return op == Op::Not || op == Op::And || op == Op::Or || op == Op::Xor || op == Op::Shl ||
         op == Op::Shr;
}

TEST(CRendererHost, ElementwiseAndCastsMatchEagerBits) {
  std::vector<Case> cases;
  const Op unary[] = {Op::Neg,   Op::Abs, Op::Sqrt,  Op::Floor, Op::Ceil,
                      Op::Round, Op::Not, Op::IsNan, Op::Exp,   Op::Log,
                      Op::Sin,   Op::Cos, Op::Tan,   Op::Tanh,  Op::Erf};
  const Op binary[] = {Op::Add, Op::Sub,   Op::Mul,   Op::Div,   Op::Mod,   Op::Max,
                       Op::Min, Op::CmpLt, Op::CmpLe, Op::CmpEq, Op::CmpNe, Op::And,
                       Op::Or,  Op::Xor,   Op::Shl,   Op::Shr,   Op::Pow,   Op::Atan2};
  for (DType t : kAll) {
    for (Op op : unary) {
      if (float_only(op) ? !ir::is_float(t) : bits_only(op) && ir::is_float(t)) continue;
      DType out = op == Op::IsNan ? DType::Bool : t;
      cases.push_back({std::string(ir::op_name(op)) + " " + dname(t),
                       {{t, {40}}},
                       [op, out](auto& a) { return std::vector<Tensor>{prim(op, out, {a[0]})}; }});
    }
    for (Op op : binary) {
      if (float_only(op) ? !ir::is_float(t) : bits_only(op) && ir::is_float(t)) continue;
      bool cmp = op == Op::CmpLt || op == Op::CmpLe || op == Op::CmpEq || op == Op::CmpNe;
      DType out = cmp ? DType::Bool : t;
      int64_t n = 17 * 24;
      cases.push_back(
          {std::string(ir::op_name(op)) + " " + dname(t), {{t, {n}}, {t, {n}}}, [op, out](auto& a) {
             return std::vector<Tensor>{prim(op, out, {a[0], a[1]})};
           }});
    }
    cases.push_back(
        {"where " + dname(t), {{DType::Bool, {6, 7}}, {t, {6, 7}}, {t, {7}}}, [](auto& a) {
           return std::vector<Tensor>{nx::where(a[0], a[1], nx::broadcast_to(a[2], {6, 7}))};
         }});
    for (DType to : kAll)
      cases.push_back({"cast " + dname(t) + "->" + dname(to), {{t, {40}}}, [to](auto& a) {
                         return std::vector<Tensor>{nx::cast(a[0], to)};
                       }});
  }
  const std::pair<DType, DType> bitcasts[] = {{DType::Float32, DType::Int32},
                                              {DType::Int32, DType::Float32},
                                              {DType::Float64, DType::Int64},
                                              {DType::Int64, DType::Float64},
                                              {DType::Float16, DType::BFloat16}};
  for (auto [from, to] : bitcasts)
    cases.push_back({"bitcast " + dname(from) + "->" + dname(to), {{from, {20}}}, [to](auto& a) {
                       return std::vector<Tensor>{prim(Op::Bitcast, to, {a[0]})};
                     }});
  run_cases(cases);
}

TEST(CRendererHost, SortsAndCumulativeSumsMatchEagerBits) {
  std::vector<Case> cases;
  for (DType t : kAll) {
    for (const Shape& s : {Shape{3, 40}, Shape{40}, Shape{5, 1}}) {
      std::string shape = " " + ir::to_string(s);
      cases.push_back(
          {"sort argsort cumsum " + dname(t) + shape, {{t, s}}, [](auto& a) {
             return std::vector<Tensor>{nx::sort(a[0]), nx::argsort(a[0]), nx::cumsum(a[0])};
           }});
      cases.push_back({"sort argsort axis 0 " + dname(t) + shape, {{t, s}}, [](auto& a) {
                         return std::vector<Tensor>{nx::sort(a[0], 0), nx::argsort(a[0], 0)};
                       }});
    }
    // Finite data: the order of the chain shows in the bits.
    cases.push_back({"finite cumsum " + dname(t),
                     {{t, {4, 50}}},
                     [](auto& a) {
                       return std::vector<Tensor>{nx::cumsum(a[0]), nx::cumsum(a[0], 0)};
                     },
                     true});
  }
  run_cases(cases);
}

TEST(CRendererHost, ReductionsAndMovementMatchEagerBits) {
  std::vector<Case> cases;
  const Op reduce_ops[] = {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd};
  const Shape shapes[] = {{3, 21}, {2, 65536}, {2, 140001}};
  for (DType t : kAll)
    for (Op op : reduce_ops)
      for (const Shape& s : shapes) {
        if (s[1] > 100 && t != DType::Float32 && t != DType::Float16 && t != DType::Int64 &&
            t != DType::Bool)
          continue;
        Shape kept = s;
        kept[1] = 1;
        cases.push_back({std::string(ir::op_name(op)) + " " + dname(t) + " " + ir::to_string(s),
                         {{t, s}},
                         [op, t, kept](auto& a) {
                           return std::vector<Tensor>{
                               nx::apply(op, t, kept, {a[0]}, std::vector<int64_t>{1})};
                         }});
      }
  // Finite data: the association order shows in the bits.
  for (DType t : kFloats)
    for (const Shape& s : shapes) {
      Shape kept = s;
      kept[1] = 1;
      cases.push_back({"finite sum " + dname(t) + " " + ir::to_string(s),
                       {{t, s}},
                       [t, kept](auto& a) {
                         return std::vector<Tensor>{
                             nx::apply(Op::ReduceSum, t, kept, {a[0]}, std::vector<int64_t>{1})};
                       },
                       true});
      cases.push_back({"finite sum of squares " + dname(t) + " " + ir::to_string(s),
                       {{t, s}},
                       [](auto& a) { return std::vector<Tensor>{nx::sum(nx::square(a[0]), {1})}; },
                       true});
    }
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16}) {
    cases.push_back({"softmax " + dname(t), {{t, {6, 33}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::softmax(a[0])};
                     }});
    // Row kernels (codegen/kernel.h): rows written, and one result per row.
    cases.push_back({"log_softmax " + dname(t), {{t, {6, 33}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::log_softmax(a[0])};
                     }});
    cases.push_back({"logsumexp " + dname(t), {{t, {6, 33}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::logsumexp(a[0], {1})};
                     }});
    cases.push_back({"layer_norm " + dname(t), {{t, {6, 33}}, {t, {33}}, {t, {33}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::nn::layer_norm(a[0], a[1], a[2])};
                     }});
    cases.push_back({"sum axes 0,2 " + dname(t), {{t, {4, 5, 6}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::sum(a[0], {0, 2})};
                     }});
    cases.push_back({"argmax " + dname(t), {{t, {6, 33}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::argmax(a[0], 1)};
                     }});
  }
  for (DType t : kAll) {
    cases.push_back({"transpose " + dname(t), {{t, {3, 4, 5}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::contiguous(nx::permute(a[0], {2, 0, 1}))};
                     }});
    cases.push_back({"slice " + dname(t), {{t, {10, 12}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::contiguous(
                           nx::slice(a[0], {{1, 9, 2}, {std::nullopt, std::nullopt, -3}}))};
                     }});
    cases.push_back({"pad " + dname(t), {{t, {4, 5}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::pad(a[0], {{1, 2}, {0, 3}}, 1)};
                     }});
    cases.push_back({"flip " + dname(t), {{t, {4, 5}}}, [](auto& a) {
                       return std::vector<Tensor>{nx::contiguous(nx::flip(a[0], {0, 1}))};
                     }});
  }
  run_cases(cases);
}

}  // namespace
