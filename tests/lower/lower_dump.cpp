// Prints the lowered IR (lir::to_string) of every kernel of the GPU source corpus
// (tests/gpu/gpu_corpus.h) under the host's default plan and under each plan of a fixed list
// that is valid for it. Not a test: a refactor of the lowering passes (codegen/lower/) must not
// change this output, so diff it before and after one:
//   build/tests/lower/lower_dump > before.txt   (then the change, the build)
//   build/tests/lower/lower_dump | diff before.txt -
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

// Test executables get trace/rune.h from their precompiled header; the corpus needs it first.
#include "trace/rune.h"
// The corpus and what it lowers with:
#include "codegen/lower.h"
#include "gpu/gpu_corpus.h"

int main() {
  using namespace gpu_test;
  const char* plans[] = {
      "host lanes:unrolled group:1",
      "host lanes:vector group:1",
      "host lanes:vector group:16",
      "host lanes:unrolled group:16",
      "host lanes:vector group:1 blocks:2",
      "host lanes:unrolled group:1 blocks:4",
      "gpu lanes:unrolled",
      "gpu lanes:threads/8",
      "gpu lanes:threads/4 rows:lanes",
      "gpu lanes:threads/32 vec4",
      "gpu lanes:unrolled tiles:128x128x16/8x8",
      "gpu lanes:unrolled tiles:128x128x16/8x8 cp.async",
      "gpu lanes:unrolled tiles:128x128x16/8x8 mma:tf32",
      "gpu lanes:unrolled tiles:128x128x16/8x8 mma:bf16",
  };
  std::vector<Labelled> corpus;
  for (auto part : {corpus_elementwise, corpus_casts, corpus_reductions, corpus_movement,
                    corpus_transcendentals})
    for (auto& l : part()) corpus.push_back(std::move(l));
  for (const Labelled& l : corpus) {
    std::vector<codegen::Plan> ps{codegen::optimise(l.k, codegen::DeviceDesc{})};
    for (const char* text : plans) {
      auto p = codegen::parse_plan(text);
      if (!p) {
        std::fprintf(stderr, "lower_dump: plan \"%s\" does not parse\n", text);
        return 1;
      }
      if (codegen::validate(l.k, *p).empty()) ps.push_back(*p);
    }
    for (const codegen::Plan& p : ps) {
      std::printf("== %s under %s\n", l.label.c_str(), p.str().c_str());
      try {
        std::printf("%s", codegen::lir::to_string(codegen::lower(l.k, p)).c_str());
      } catch (const std::exception& e) {
        std::printf("throws: %s\n", e.what());
      }
    }
  }
  return 0;
}
