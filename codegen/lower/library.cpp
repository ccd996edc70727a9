// The GPU's library calls: cumsum, sort and argsort (the host runs codegen/cpu/sort_scan.cpp).
#include "codegen/core_ops.h"
#include "codegen/lower/builder.h"
#include "codegen/lower/passes.h"

namespace codegen::lowering {

namespace {

class LibraryCalls : public Builder {
 public:
  using Builder::Builder;
  void run() { library(); }

 private:
  // The sort order of dtype t as a signed int64 key: integers as themselves; floats (16-bit ones
  // through float32, exactly) as +-magnitude with both zeros on 0 and every NaN above +inf.
  NodeRef sort_key(NodeRef v) const {
    DType t = v->dtype;
    // uint64 (ints, issue 18): its bits with the top one flipped order like its values.
    if (t == DType::UInt64)
      return legalize(b::bxor(b::cast(v, DType::Int64), b::ci(DType::Int64, INT64_MIN)));
    if (!is_float(t)) return legalize(b::cast(v, DType::Int64));
    if (is_half(t)) v = legalize(b::cast(v, DType::Float32)), t = DType::Float32;
    const bool f64 = t == DType::Float64;
    DType it = f64 ? DType::Int64 : DType::Int32;
    NodeRef bits = b::bitcast(v, it);
    NodeRef mag = b::band(bits, b::ci(it, f64 ? INT64_MAX : INT32_MAX));
    NodeRef m64 = f64 ? mag : b::cast(mag, DType::Int64);
    int64_t inf = f64 ? 0x7ff0000000000000ll : 0x7f800000ll;
    NodeRef key = b::where(b::lt(bits, b::ci(it, 0)), b::sub(I(0), m64), m64);
    return legalize(b::where(b::lt(I(inf), m64), I(INT64_MAX), key));
  }

  // GPU library kernels (the host runs codegen/cpu/sort_scan.cpp) over rows of L contiguous
  // elements of param 1 from the operand's offset.
  //   Cumsum: one thread per row, acc = x[0], then acc = acc + x[i] in increasing i.
  //   Sort / Argsort: a stable rank sort, one thread per element: its rank is the number of
  //   elements before it with key <= its key plus those after it with key < its key. A stable
  //   sort's result is unique, so the bits match the host's.
  void library() {
    const LibraryCall& lib = *k_.library;
    const int64_t L = k_.shape.empty() ? 1 : k_.shape.back(), n = numel(k_.shape);
    const int64_t rows = L == 0 ? 0 : n / L;
    const DType in = lib.in_dtype;
    if (lib.op == Op::Cumsum) {
      entry("", rows, rows, [&] {
        items(rows, [&](NodeRef w) {
          NodeRef x0 = let("x0", add(I(lib.offset), mul(w, L)));
          NodeRef y0 = let("y0", mul(w, L));
          VarId acc = reg("acc", in, 1, load_at(1, in, x0));
          store(0, y0, at(acc, I(0)));
          VarId i = var("i");
          loop(i, I(1), I(L), Loop::Serial, [&] {
            set(acc, I(0), legalize(b::add(at(acc, I(0)), load_at(1, in, add(x0, V(i))))));
            store(0, add(y0, V(i)), at(acc, I(0)));
          });
        });
      });
      return;
    }
    entry("", n, n, [&] {
      items(n, [&](NodeRef w) {
        NodeRef r = udiv(w, L), i = urem(w, L);
        NodeRef row = let("row", add(I(lib.offset), mul(r, L)));
        NodeRef ki = let("key", sort_key(load_at(1, in, add(row, i))));
        VarId rank = reg("rank", DType::Int64, 1, I(0));
        VarId j = var("j");
        loop(j, I(0), I(L), Loop::Serial, [&] {
          NodeRef kj = sort_key(load_at(1, in, add(row, V(j))));
          NodeRef before = b::where(b::lt(V(j), i), b::le(kj, ki), b::lt(kj, ki));
          set(rank, I(0), b::add(at(rank, I(0)), b::cast(before, DType::Int64)));
        });
        NodeRef value = lib.op == Op::Argsort ? i : load_at(1, in, add(row, i));
        store(0, add(mul(r, L), at(rank, I(0))), legalize(value));
      });
    });
  }
};

}  // namespace

lir::Kernel lower_library_call(const KernelSpec& k, const Plan& p) {
  LibraryCalls pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
