#include "trace/check_replay.h"

#include <stdexcept>

#include "core/check.h"
#include "core/ops.h"
#include "trace/structured.h"

namespace rune::detail {

namespace {

// `e` with " (<what>)" appended to its message, as the same standard exception type where it is
// one (so a caller catching std::invalid_argument still catches it); other types unchanged.
std::exception_ptr with_note(std::exception_ptr e, const std::string& what) {
  auto note = [&](const std::exception& x) { return std::string(x.what()) + " (" + what + ")"; };
  try {
    std::rethrow_exception(e);
  } catch (const jit_error& x) {
    return std::make_exception_ptr(jit_error(note(x)));
  } catch (const std::out_of_range& x) {
    return std::make_exception_ptr(std::out_of_range(note(x)));
  } catch (const std::invalid_argument& x) {
    return std::make_exception_ptr(std::invalid_argument(note(x)));
  } catch (const std::domain_error& x) {
    return std::make_exception_ptr(std::domain_error(note(x)));
  } catch (const std::length_error& x) {
    return std::make_exception_ptr(std::length_error(note(x)));
  } catch (const std::logic_error& x) {
    return std::make_exception_ptr(std::logic_error(note(x)));
  } catch (const std::range_error& x) {
    return std::make_exception_ptr(std::range_error(note(x)));
  } catch (const std::overflow_error& x) {
    return std::make_exception_ptr(std::overflow_error(note(x)));
  } catch (const std::underflow_error& x) {
    return std::make_exception_ptr(std::underflow_error(note(x)));
  } catch (const std::runtime_error& x) {
    return std::make_exception_ptr(std::runtime_error(note(x)));
  } catch (...) {
    return e;
  }
}

}  // namespace

std::vector<ir::NodeRef> check_nodes(const Tracer::Check& c) {
  std::vector<ir::NodeRef> r{c.first_false};
  r.insert(r.end(), c.data.begin(), c.data.end());
  return r;
}

void replay_check(const Tracer::Check& c, const std::vector<nx::Tensor>& vals, nx::Device device) {
  nx::Tensor first = vals.at(0);
  std::vector<nx::Tensor> data(vals.begin() + 1, vals.end());
  nx::CreateOn on(device);
  nx::Tensor ok = nx::reshape(nx::not_equal(nx::arange(c.size), first), c.shape);
  nx::detail::check_flat(ok, data, c.fail);
}

void eval_check(const Tracer::Check& c, GraphEvaluator& ev) {
  replay_check(c, ev(check_nodes(c)), ev.device());
}

void replay_batched_check(const char* api, const Tracer::Check& c,
                          const std::vector<nx::Tensor>& vals, int64_t batch, nx::Device device) {
  const nx::Tensor& first = vals.at(0);
  const size_t rank = c.shape.size();
  nx::Shape grid{1}, per_example{batch};
  grid.insert(grid.end(), c.shape.begin(), c.shape.end());
  per_example.insert(per_example.end(), rank, 1);
  nx::CreateOn on(device);
  // ok[b, i...] is false exactly at example b's first failing element, so the first false
  // element in C order is the first failing example's, at its own index.
  nx::Tensor ok =
      nx::not_equal(nx::reshape(nx::arange(c.size), grid), nx::reshape(first, per_example));
  // Each datum broadcasts to the example's shape: align its axes to ok's after the batch axis.
  std::vector<nx::Tensor> aligned;
  for (size_t j = 1; j < vals.size(); ++j) {
    const nx::Tensor& d = vals[j];
    nx::Shape s{batch};
    s.insert(s.end(), rank - static_cast<size_t>(d.ndim() - 1), 1);
    s.insert(s.end(), d.shape().begin() + 1, d.shape().end());
    aligned.push_back(nx::reshape(d, s));
  }
  std::string where = std::string(api) + ": example ";
  nx::CheckFail fail = [f = c.fail, where, batch](const std::vector<int64_t>& index,
                                                  const std::vector<nx::Tensor>& at) {
    std::vector<int64_t> inner(index.begin() + 1, index.end());
    return with_note(f(inner, at),
                     where + std::to_string(index[0]) + " of " + std::to_string(batch) + " fails");
  };
  nx::detail::check_flat(ok, aligned, std::move(fail));
}

}  // namespace rune::detail
