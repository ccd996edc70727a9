#include "trace/staged_program.h"

#include <atomic>
#include <stdexcept>

#include "codegen/compile.h"
#include "runtime/launcher.h"

namespace rune {

namespace {

std::atomic<size_t> iterations{0};

// What a loop step runs: bufs are the initial carry, the captured operands, then the slots the
// final carry goes to.
struct LoopPlan {
  std::shared_ptr<const runtime::Program> body;
  int64_t trips = 0;  // -1: while `cond` (then `copy` moves the final carry to its slots)
  std::shared_ptr<const runtime::Program> cond, copy;
  size_t n_carry = 0, n_operands = 0;
  std::vector<size_t> carry_bytes;
  // Carry leaf k is in the buffer given for output writer[k]: the program writes one buffer for
  // outputs sharing a slot (the last one given), so leaves returned twice read that one.
  std::vector<size_t> writer;
};

// while_loop: the carry's predicate, read back on the host (on a GPU a wait for the work queued
// so far: one host round trip per iteration).
bool holds(const LoopPlan& p, const std::vector<char*>& in) {
  std::vector<runtime::BufferRef> out = p.cond->run(in.data(), in.size());
  bool go = false;
  const runtime::Launcher& l = p.cond->launcher();
  if (l.memory().kind == runtime::DeviceKind::CPU)
    go = *static_cast<const bool*>(out[0]->data);  // CPU:n: this runs on the stream already
  else
    l.read(&go, out[0]->data, sizeof go);
  return go;
}

// Runs the loop: trips times, or while the predicate holds. Two carries serve in turn
// (allocated once per run: no allocation per iteration): iteration t reads the one t - 1 wrote
// (the initial carry first) and writes the other; on a GPU reusing them is ordered by the stream.
// A fixed-trip loop's last iteration writes the program's slots directly; a while loop (whose
// last iteration is not known ahead), or a body that returns one value for two carry leaves (the
// program writes one buffer for both), ends by copying the carry into them.
void run_loop(const LoopPlan& p, char* const* bufs) {
  std::vector<char*> in(bufs, bufs + p.n_carry + p.n_operands);
  char* const* final_slots = bufs + p.n_carry + p.n_operands;
  const runtime::Device memory = p.body->launcher().memory();
  std::vector<runtime::BufferRef> last;
  for (size_t k = 0; k < p.n_carry; ++k)
    last.push_back(std::make_shared<runtime::Buffer>(memory, final_slots[k], p.carry_bytes[k],
                                                     std::function<void()>{}));
  const bool copy_at_end = p.copy != nullptr;
  std::vector<runtime::BufferRef> turn[2];
  auto turn_of = [&](int64_t t) -> std::vector<runtime::BufferRef>& {
    auto& b = turn[t % 2];
    if (b.empty())
      for (size_t k = 0; k < p.n_carry; ++k)
        b.push_back(runtime::allocate(memory, p.carry_bytes[k]));
    return b;
  };
  int64_t t = 0;
  for (; p.trips < 0 ? holds(p, in) : t < p.trips; ++t) {
    std::vector<runtime::BufferRef>& into = !copy_at_end && t == p.trips - 1 ? last : turn_of(t);
    p.body->run(in.data(), in.size(), into.data());
    for (size_t k = 0; k < p.n_carry; ++k) in[k] = static_cast<char*>(into[p.writer[k]]->data);
  }
  if (copy_at_end) p.copy->run(in.data(), p.n_carry, last.data());
  iterations += static_cast<size_t>(t);
}

}  // namespace

size_t loop_step_iterations() { return iterations.load(); }

std::shared_ptr<const runtime::Program> compile_with_loops(const std::vector<ir::NodeRef>& roots,
                                                           const std::vector<Tracer::Loop>& loops,
                                                           int n_params, nx::Device device) {
  auto m = std::make_shared<runtime::Program>();
  m->device = device;
  m->n_inputs = n_params;
  m->slot_bytes.assign(static_cast<size_t>(n_params), -1);
  // Where each param lives in m: an input slot, or (a loop's output) the slot its step writes.
  std::vector<int> param_slot(static_cast<size_t>(n_params));
  for (int p = 0; p < n_params; ++p) param_slot[p] = p;
  auto new_slot = [&](int64_t bytes) {
    m->slot_bytes.push_back(bytes);
    return static_cast<int>(m->slot_bytes.size() - 1);
  };
  // Appends part p's steps; `map` (p's slot -> m's slot, -1: not yet) gets its other slots.
  auto append = [&](const runtime::Program& p, std::vector<int>& map) {
    for (int s = 0; s < p.n_inputs; ++s) map[s] = param_slot[s];
    for (size_t s = p.n_inputs; s < p.slot_bytes.size(); ++s)
      if (map[s] < 0) map[s] = new_slot(p.slot_bytes[s]);
    for (runtime::Step st : p.steps) {
      for (int& s : st.slots) s = map[s];
      m->steps.push_back(std::move(st));
    }
  };
  // The results' part is compiled first so the outputs take the first slots after the inputs.
  auto results = codegen::compile(roots, n_params, device);
  std::vector<int> results_map(results->slot_bytes.size(), -1);
  for (int s : results->output_slots) {
    if (results_map[s] < 0) results_map[s] = new_slot(results->slot_bytes[s]);
    m->output_slots.push_back(results_map[s]);
  }
  for (const auto& loop : loops) {
    if (loop.trips == 0 || (loop.trips < 0) != (loop.cond_root != nullptr))
      throw std::logic_error("rune::jit: a loop step needs a trip count or a condition");
    auto pre = codegen::compile(loop.inputs, n_params, device);
    std::vector<int> map(pre->slot_bytes.size(), -1);
    append(*pre, map);
    auto plan = std::make_shared<LoopPlan>();
    plan->body = codegen::compile(loop.body_roots, loop.body_params, device);
    plan->trips = loop.trips;
    plan->n_carry = loop.body_roots.size();
    plan->n_operands = loop.inputs.size() - plan->n_carry;
    const auto& outs = plan->body->output_slots;
    bool shared = false;
    for (size_t k = 0; k < plan->n_carry; ++k) {
      size_t w = k;
      for (size_t j = k + 1; j < plan->n_carry; ++j)
        if (outs[j] == outs[k]) w = j;
      shared |= w != k;
      plan->writer.push_back(w);
    }
    if (loop.cond_root) plan->cond = codegen::compile({loop.cond_root}, loop.body_params, device);
    if (loop.cond_root || shared) {
      std::vector<ir::NodeRef> carry;  // the identity on the carry, into the program's slots
      for (size_t k = 0; k < plan->n_carry; ++k) {
        ir::NodeRef r = loop.body_roots[k];
        carry.push_back(ir::make(ir::Op::Param, r->dtype, r->shape, {},
                                 ir::LoadArg{static_cast<int>(k), ir::View::contiguous(r->shape)}));
      }
      plan->copy = codegen::compile(carry, static_cast<int>(plan->n_carry), device);
    }
    runtime::Step st;
    st.kind = runtime::Step::Kind::Library;
    st.name = "loop";
    st.items = 1;
    for (int s : pre->output_slots) st.slots.push_back(map[s]);
    for (size_t k = 0; k < plan->n_carry; ++k) {
      ir::NodeRef r = loop.body_roots[k];
      size_t bytes = static_cast<size_t>(ir::numel(r->shape) * ir::itemsize(r->dtype));
      plan->carry_bytes.push_back(bytes);
      int s = new_slot(static_cast<int64_t>(bytes));
      param_slot[loop.outputs[k]] = s;
      st.slots.push_back(s);
    }
    st.library = [](const void* p, char** bufs, int64_t, int64_t) {
      run_loop(*static_cast<const LoopPlan*>(p), bufs);
    };
    st.queue = [plan](runtime::gpu::Context&, char* const* bufs) { run_loop(*plan, bufs); };
    st.geometry.grid = 1;  // a GPU launcher skips steps without work items
    st.plan = plan;
    m->steps.push_back(std::move(st));
  }
  append(*results, results_map);
  m->inplace_inputs.assign(m->output_slots.size(), {});
  m->finalize();
  return m;
}

}  // namespace rune
