#include "trace/staged_program.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "codegen/compile.h"
#include "runtime/launcher.h"
#include "trace/structured.h"

namespace rune {

namespace {

std::atomic<size_t> iterations{0};

// What a loop step runs: bufs are the initial carry, the captured operands, the slots the
// final carry goes to, then the stacked ys' slots (iteration t writes its rows at row t).
struct LoopPlan {
  std::shared_ptr<const runtime::Program> body;
  int64_t trips = 0;  // -1: while `cond` (then `copy` moves the final carry to its slots)
  std::shared_ptr<const runtime::Program> cond, copy;
  size_t n_carry = 0, n_operands = 0, n_ys = 0;
  // The body's inputs that are its own loops' results (Tracer::Loop::inputs' nullptr): no
  // buffer is given for them (the body's program binds them itself).
  std::vector<size_t> unbound;
  std::vector<size_t> carry_bytes, row_bytes;
  // Carry leaf k is in the memory given for output writer[k]: outputs sharing a slot are written
  // once, to the last one's memory, so leaves returned twice read that one.
  std::vector<size_t> writer;
};

// One program run many times with one slot table: its temporaries share one block for the
// whole loop (on a GPU, reusing it is ordered by the stream as in Program::run), and each run
// only points its inputs and outputs at the given memory and launches its steps (no allocation
// per iteration). Outputs sharing a slot are written once, to the last one's memory.
//
// Each step's params are bound once: a run patches only the params that are the program's
// inputs or outputs, and calls a small host kernel directly where its launcher would do just
// that (Launcher::inline_kernel): a loop's iteration costs its kernels, not their dispatch.
class Reruns {
 public:
  explicit Reruns(const runtime::Program& p) : p_(p) {
    std::vector<char*> ptr(p.slot_bytes.size(), nullptr);
    if (p.temp_bytes > 0)
      temps_ = runtime::allocate(launcher().memory(), static_cast<size_t>(p.temp_bytes));
    for (size_t s = p.n_inputs; s < ptr.size(); ++s)
      if (p.temp_offset[s] >= 0) ptr[s] = static_cast<char*>(temps_->data) + p.temp_offset[s];
    // Per slot: where a run's pointer for it comes from (-1: bound now; else an index into
    // the run's inputs, then its outputs).
    std::vector<int> source(p.slot_bytes.size(), -1);
    for (int i = 0; i < p.n_inputs; ++i) source[i] = i;
    for (size_t o = 0; o < p.output_slots.size(); ++o)
      source[p.output_slots[o]] = p.n_inputs + static_cast<int>(o);
    for (const auto& st : p.steps) {
      Bound b{&st, launcher().inline_kernel(st), {}, {}};
      for (size_t q = 0; q < st.slots.size(); ++q) {
        b.bufs.push_back(ptr[st.slots[q]]);
        if (source[st.slots[q]] >= 0) b.patches.push_back({q, source[st.slots[q]]});
      }
      steps_.push_back(std::move(b));
    }
  }
  void run(char* const* inputs, char* const* outputs) {
    const int n_in = p_.n_inputs;
    for (auto& b : steps_) {
      for (const auto& [q, from] : b.patches)
        b.bufs[q] = from < n_in ? inputs[from] : outputs[from - n_in];
      if (b.inline_fn)
        b.inline_fn(b.bufs.data(), 0, b.step->items);
      else
        launcher().launch(*b.step, b.bufs.data());
    }
  }
  const runtime::Launcher& launcher() const { return p_.launcher(); }

 private:
  struct Bound {
    const runtime::Step* step;
    runtime::HostKernelFn inline_fn;  // non-null: call it directly
    std::vector<char*> bufs;
    std::vector<std::pair<size_t, int>> patches;  // (param, source) set by each run
  };
  const runtime::Program& p_;
  runtime::BufferRef temps_;
  std::vector<Bound> steps_;
};

// Runs the loop: trips times, or while the predicate holds. Two carries serve in turn
// (allocated once per run): iteration t reads the one t - 1 wrote (the initial carry first) and
// writes the other. A fixed-trip loop's last iteration writes the program's slots directly; a
// while loop (whose last iteration is not known ahead), or a body that returns one value for two
// carry leaves, ends by copying the carry into them. A while loop reads its predicate back on
// the host each iteration (on a GPU a wait for the work queued so far).
void run_loop(const LoopPlan& p, char* const* bufs) {
  const size_t given = p.n_carry + p.n_operands - p.unbound.size();
  std::vector<char*> in(bufs, bufs + given);
  for (size_t u : p.unbound) in.insert(in.begin() + static_cast<long>(u), nullptr);
  char* const* final_slots = bufs + given;
  char* const* ys = final_slots + p.n_carry;
  std::vector<char*> out(p.n_carry + p.n_ys);  // one iteration's outputs: carry, then rows
  Reruns body(*p.body);
  const runtime::Device memory = body.launcher().memory();
  const bool copy_at_end = p.copy != nullptr;
  std::vector<runtime::BufferRef> turn_buffers;
  std::vector<char*> turn[2];
  for (int s = 0; s < 2 && (p.trips < 0 || s < p.trips - (copy_at_end ? 0 : 1)); ++s)
    for (size_t k = 0; k < p.n_carry; ++k) {
      turn_buffers.push_back(runtime::allocate(memory, p.carry_bytes[k]));
      turn[s].push_back(static_cast<char*>(turn_buffers.back()->data));
    }
  std::optional<Reruns> cond;
  runtime::BufferRef flag;
  char* flag_ptr = nullptr;
  if (p.cond) {
    cond.emplace(*p.cond);
    flag = runtime::allocate(memory, 1);
    flag_ptr = static_cast<char*>(flag->data);
  }
  auto holds = [&] {
    cond->run(in.data(), &flag_ptr);
    bool go = false;
    if (memory.kind == runtime::DeviceKind::CPU)
      go = *reinterpret_cast<const bool*>(flag_ptr);  // CPU:n: this runs on its stream already
    else
      cond->launcher().read(&go, flag_ptr, sizeof go);
    return go;
  };
  int64_t t = 0;
  for (; p.trips < 0 ? holds() : t < p.trips; ++t) {
    char* const* into = !copy_at_end && t == p.trips - 1 ? final_slots : turn[t % 2].data();
    std::copy(into, into + p.n_carry, out.begin());
    for (size_t j = 0; j < p.n_ys; ++j)
      out[p.n_carry + j] = ys[j] + static_cast<size_t>(t) * p.row_bytes[j];
    body.run(in.data(), out.data());
    for (size_t k = 0; k < p.n_carry; ++k) in[k] = out[p.writer[k]];
  }
  if (copy_at_end) Reruns(*p.copy).run(in.data(), final_slots);
  iterations += static_cast<size_t>(t);
}

// compile_with_loops over loops without xs (detail::lower_rows), whose bodies' loops have none
// either.
std::shared_ptr<const runtime::Program> compile_lowered(const std::vector<ir::NodeRef>& roots,
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
    if (loop.trips == 0 || (loop.trips < 0) != (loop.cond_root != nullptr) || loop.n_xs != 0)
      throw std::logic_error("rune::jit: a loop step needs a trip count or a condition, no xs");
    std::vector<ir::NodeRef> given;  // the inputs the program computes before the loop
    for (ir::NodeRef in : loop.inputs)
      if (in) given.push_back(in);
    auto pre = codegen::compile(given, n_params, device);
    std::vector<int> map(pre->slot_bytes.size(), -1);
    append(*pre, map);
    auto plan = std::make_shared<LoopPlan>();
    const int body_params = static_cast<int>(loop.inputs.size());
    detail::Staging
        body;  // a loop step's body has no checks (control_flow.cpp replays such a body)
    detail::stage_equations(loop.body, body);
    plan->body = body.loops.empty()
                     ? codegen::compile(loop.body_roots, body_params, device)
                     : compile_lowered(loop.body_roots, body.loops, body_params, device);
    for (size_t k = 0; k < loop.inputs.size(); ++k)
      if (!loop.inputs[k]) plan->unbound.push_back(k);
    plan->trips = loop.trips;
    plan->n_ys = loop.n_ys();
    plan->n_carry = loop.n_carry;
    plan->n_operands = loop.inputs.size() - plan->n_carry;
    const auto& outs = plan->body->output_slots;
    bool shared = false;
    for (size_t k = 0; k < plan->n_carry; ++k) {
      size_t w = k;
      for (size_t j = k + 1; j < outs.size(); ++j)
        if (outs[j] == outs[k]) w = j;
      shared |= w != k;
      plan->writer.push_back(w);
    }
    for (size_t j = plan->n_carry; j < outs.size(); ++j)
      for (size_t i = j + 1; i < outs.size(); ++i)
        if (outs[i] == outs[j])  // the scheduler gives every root a slot of its own
          throw std::logic_error("rune::jit: a loop's rows share a slot of its body's program");
    if (loop.cond_root) plan->cond = codegen::compile({loop.cond_root}, body_params, device);
    if (loop.cond_root || shared) {
      std::vector<ir::NodeRef> carry;  // the identity on the carry, into the program's slots
      for (size_t k = 0; k < plan->n_carry; ++k) {
        ir::NodeRef r = loop.body_roots[k];
        carry.push_back(ir::contiguous_param(static_cast<int>(k), r->dtype, r->shape));
      }
      plan->copy = codegen::compile(carry, static_cast<int>(plan->n_carry), device);
    }
    runtime::Step st;
    st.kind = runtime::Step::Kind::Library;
    st.name = "loop";
    st.items = 1;
    for (int s : pre->output_slots) st.slots.push_back(map[s]);
    for (size_t k = 0; k < loop.body_roots.size(); ++k) {
      ir::NodeRef r = loop.body_roots[k];
      size_t bytes = static_cast<size_t>(ir::numel(r->shape) * ir::itemsize(r->dtype));
      const bool row = k >= plan->n_carry;
      (row ? plan->row_bytes : plan->carry_bytes).push_back(bytes);
      int s = new_slot(static_cast<int64_t>(row ? bytes * static_cast<size_t>(loop.trips) : bytes));
      if (loop.outputs[k] >= 0) param_slot[loop.outputs[k]] = s;
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

}  // namespace

size_t loop_step_iterations() { return iterations.load(); }

std::shared_ptr<const runtime::Program> compile_with_loops(const std::vector<ir::NodeRef>& roots,
                                                           const std::vector<Tracer::Loop>& loops,
                                                           int n_params, nx::Device device) {
  // The stage rule of a loop: rows read by the trip counter, then one loop step.
  std::vector<Tracer::Loop> lowered;
  for (const auto& loop : loops) lowered.push_back(detail::lower_rows(loop, device));
  return compile_lowered(roots, lowered, n_params, device);
}

namespace detail {

void stage_check(const Tracer::Check& c, Staging& s) {
  if (!s.checks)
    throw std::logic_error(std::string("rune::jit: a check in the body of a loop step"));
  s.checks->push_back(c);
}

void stage_loop(const Tracer::Loop& loop, Staging& s) { s.loops.push_back(loop); }

void stage_equations(const std::vector<Tracer::Equation>& eqs, Staging& s) {
  for (const auto& e : eqs)
    std::visit(
        Overloaded{
#define STRUCTURED(Row, eval, vjp, jvp, batch, stage) [&](const Tracer::Row& r) { stage(r, s); },
#include "trace/structured.def"
#undef STRUCTURED
        },
        e);
}

}  // namespace detail

}  // namespace rune
