// The corpus of the GPU source tests: kernels from real nx programs (every elementwise primitive
// and dtype, casts, reductions, movement, decomposed transcendentals), traced, scheduled and
// decomposed as rune::jit and codegen/compile.cpp do. Shared by the NVRTC and hiprtc tests so
// both backends compile the same kernels.
#pragma once
#include <vector>

#include "core/attention.h"
#include "gpu_test_util.h"

namespace gpu_test {

inline bool float_only(Op op) {
  return op == Op::Sqrt || op == Op::Exp || op == Op::Log || op == Op::Sin || op == Op::Cos ||
         op == Op::Tan || op == Op::Tanh || op == Op::Pow || op == Op::Atan2;
}
inline bool bits_only(Op op) {
  return op == Op::Not || op == Op::And || op == Op::Or || op == Op::Xor || op == Op::Shl ||
         op == Op::Shr;
}
inline bool valid_for(Op op, DType t) {
  if (float_only(op)) return ir::is_float(t);
  if (bits_only(op)) return !ir::is_float(t);
  return true;
}

inline std::vector<Labelled> corpus_elementwise() {
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
      {DType::Float16, DType::BFloat16}, {DType::BFloat16, DType::Float16},
      {DType::Float32, DType::UInt32},   {DType::UInt64, DType::Float64},
      {DType::Float16, DType::Int16},    {DType::UInt16, DType::BFloat16},
      {DType::Int8, DType::UInt8}};
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
  return ks;
}

inline std::vector<Labelled> corpus_casts() {
  std::vector<Labelled> ks;
  for (DType from : kAll)
    for (DType to : kAll)
      add_program(ks, "cast " + dname(from) + "->" + dname(to), {{from, {3, 5}}},
                  [&](auto& a) { return std::vector<Tensor>{nx::cast(a[0], to)}; });
  return ks;
}

inline std::vector<Labelled> corpus_reductions() {
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
    // Row kernels (codegen/kernel.h): several reductions of each row, then the row or its result.
    add_program(ks, "log_softmax " + dname(t), {{t, {8, 33}}},
                [](auto& a) { return std::vector<Tensor>{nx::log_softmax(a[0])}; });
    add_program(ks, "layer_norm " + dname(t), {{t, {8, 33}}, {t, {33}}, {t, {33}}},
                [](auto& a) { return std::vector<Tensor>{nx::nn::layer_norm(a[0], a[1], a[2])}; });
    add_program(ks, "cross_entropy " + dname(t), {{t, {8, 33}}, {DType::Int64, {8}}},
                [](auto& a) { return std::vector<Tensor>{nx::nn::cross_entropy(a[0], a[1])}; });
    add_program(ks, "argmax " + dname(t), {{t, {8, 33}}},
                [](auto& a) { return std::vector<Tensor>{nx::argmax(a[0], 1)}; });
    add_program(ks, "sum of squares multi-axis " + dname(t), {{t, {6, 300, 400}}}, [](auto& a) {
      return std::vector<Tensor>{nx::sum(nx::square(a[0]), {1, 2})};
    });
  }
  add_program(ks, "matmul", {{DType::Float32, {16, 32}}, {DType::Float32, {32, 8}}},
              [](auto& a) { return std::vector<Tensor>{nx::matmul(a[0], a[1])}; });
  // Products with fused epilogues: bias and relu, a masked select, a batched float64 product.
  add_program(ks, "matmul bias relu",
              {{DType::Float32, {16, 32}}, {DType::Float32, {32, 8}}, {DType::Float32, {8}}},
              [](auto& a) { return std::vector<Tensor>{nx::relu(nx::matmul(a[0], a[1]) + a[2])}; });
  add_program(ks, "matmul where",
              {{DType::Float32, {4, 5}}, {DType::Float32, {5, 6}}, {DType::Bool, {4, 6}}},
              [](auto& a) {
                auto m = nx::matmul(a[0], a[1]);
                return std::vector<Tensor>{nx::where(a[2], m, nx::scalar_like(m, 0.5))};
              });
  add_program(ks, "batched matmul tanh float64",
              {{DType::Float64, {3, 4, 5}}, {DType::Float64, {3, 5, 2}}},
              [](auto& a) { return std::vector<Tensor>{nx::tanh(nx::matmul(a[0], a[1]))}; });
  // Tiled float32 products (plan part tiles): edge tiles, transposed operands, a batched
  // product with an epilogue, and bench_gpu's 4096^2.
  add_program(ks, "matmul tiled", {{DType::Float32, {130, 70}}, {DType::Float32, {70, 150}}},
              [](auto& a) { return std::vector<Tensor>{nx::matmul(a[0], a[1])}; });
  add_program(ks, "matmul tiled transposed",
              {{DType::Float32, {48, 96}}, {DType::Float32, {80, 48}}}, [](auto& a) {
                return std::vector<Tensor>{nx::matmul(nx::transpose(a[0]), nx::transpose(a[1]))};
              });
  add_program(
      ks, "matmul tiled batched bias relu",
      {{DType::Float32, {2, 65, 33}}, {DType::Float32, {2, 33, 72}}, {DType::Float32, {72}}},
      [](auto& a) { return std::vector<Tensor>{nx::relu(nx::matmul(a[0], a[1]) + a[2])}; });
  add_program(ks, "matmul 4096", {{DType::Float32, {4096, 4096}}, {DType::Float32, {4096, 4096}}},
              [](auto& a) { return std::vector<Tensor>{nx::matmul(a[0], a[1])}; });
  // Convolutions: products whose operand is the windows of the padded input read in place
  // (grouped operands, codegen/grouped_view.h), per output and tiled, with both gradients.
  for (int64_t c : {4, 16}) {
    const Shape xs{2, c, 12, 12}, ws{2 * c, c, 3, 3};
    add_program(ks, "conv3x3 " + std::to_string(c), {{DType::Float32, xs}, {DType::Float32, ws}},
                [](auto& a) {
                  nx::ConvOptions o;
                  o.padding = "SAME";
                  auto f = [&](const std::pair<Tensor, Tensor>& p) {
                    Tensor y = nx::conv(p.first, p.second, o);
                    return nx::sum(y * y);
                  };
                  auto [loss, g] = rune::value_and_grad(f, std::make_pair(a[0], a[1]));
                  return std::vector<Tensor>{loss, g.first, g.second};
                });
  }
  // float16 / bfloat16 operands read directly by the tiled plan (16-bit slices in shared memory,
  // vector and scalar staging), rounded once on store, with and without an epilogue.
  for (DType t : {DType::Float16, DType::BFloat16}) {
    add_program(ks, "matmul tiled " + dname(t), {{t, {130, 72}}, {t, {72, 150}}},
                [](auto& a) { return std::vector<Tensor>{nx::matmul(a[0], a[1])}; });
    add_program(ks, "matmul tiled batched bias relu " + dname(t),
                {{t, {3, 65, 33}}, {t, {3, 33, 72}}, {t, {72}}}, [](auto& a) {
                  return std::vector<Tensor>{nx::relu(nx::matmul(a[0], a[1]) + a[2])};
                });
  }
  add_program(ks, "empty sum", {{DType::Float32, {4, 0}}},
              [](auto& a) { return std::vector<Tensor>{nx::sum(a[0], {1})}; });
  // Library kernels: sort, argsort (rank sorts) and cumsum (one chain per row), every dtype,
  // along the last axis and along axis 0 (a permuted operand copied contiguous first).
  for (DType t : kAll) {
    add_program(ks, "sort argsort cumsum " + dname(t), {{t, {4, 33}}}, [](auto& a) {
      return std::vector<Tensor>{nx::sort(a[0]), nx::argsort(a[0]), nx::cumsum(a[0])};
    });
    add_program(ks, "sort argsort cumsum axis 0 " + dname(t), {{t, {5, 6}}}, [](auto& a) {
      return std::vector<Tensor>{nx::sort(a[0], 0), nx::argsort(a[0], 0), nx::cumsum(a[0], 0)};
    });
  }
  return ks;
}

inline std::vector<Labelled> corpus_movement() {
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
  return ks;
}

inline std::vector<Labelled> corpus_transcendentals() {
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
  return ks;
}

// Attention (nx::nn::scaled_dot_product_attention), one GPU kernel each
// (codegen/lower/attention.cpp): causal, a padding mask with Tq != Tk and a partial last block of
// rows (1100 float32 keys: 7 rows per block), a float mask in float64, and a single head without
// batch axes. The causal mask is a kernel of its own.
inline std::vector<Labelled> corpus_attention() {
  std::vector<Labelled> ks;
  using nx::nn::AttentionOptions;
  using nx::nn::scaled_dot_product_attention;
  add_program(ks, "attention causal float32",
              {{DType::Float32, {2, 4, 128, 32}},
               {DType::Float32, {2, 4, 128, 32}},
               {DType::Float32, {2, 4, 128, 32}}},
              [](auto& a) {
                return std::vector<Tensor>{scaled_dot_product_attention(
                    a[0], a[1], a[2], AttentionOptions{.causal = true})};
              });
  add_program(ks, "attention padding float32",
              {{DType::Float32, {2, 1, 300, 4}},
               {DType::Float32, {2, 1, 1100, 4}},
               {DType::Float32, {2, 1, 1100, 3}},
               {DType::Bool, {2, 1, 1, 1100}}},
              [](auto& a) {
                return std::vector<Tensor>{
                    scaled_dot_product_attention(a[0], a[1], a[2], AttentionOptions{.mask = a[3]})};
              });
  add_program(ks, "attention float mask float64",
              {{DType::Float64, {3, 37, 16}},
               {DType::Float64, {3, 40, 16}},
               {DType::Float64, {3, 40, 8}},
               {DType::Float64, {37, 40}}},
              [](auto& a) {
                return std::vector<Tensor>{
                    scaled_dot_product_attention(a[0], a[1], a[2], AttentionOptions{.mask = a[3]})};
              });
  return ks;
}

}  // namespace gpu_test
