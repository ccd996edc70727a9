// rune::data (trace/data.h, docs/data.md): host datasets, the epoch's order, batches built on a
// producer thread.
#include "trace/data.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <variant>

#include "core/io.h"
#include "core/random.h"
#include "runtime/allocator.h"
#include "runtime/stream.h"

namespace rune::data {
namespace detail {
namespace {

// A fresh contiguous tensor in host memory (on the CPU or another host device, CPU:n), its
// memory given to fill: as nx::place makes a host device's copy, with no work pending on it.
nx::Tensor host_tensor(nx::DType t, const nx::Shape& shape, uint8_t*& data,
                       nx::Device d = nx::Device::cpu()) {
  size_t bytes = static_cast<size_t>(ir::numel(shape) * ir::itemsize(t));
  auto buf = runtime::allocate(d, bytes);
  data = static_cast<uint8_t*>(buf->data);
  return nx::make_concrete(t, std::move(buf), ir::View::contiguous(shape), d);
}

std::shared_ptr<const std::vector<uint8_t>> read_file(const char* api, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(std::string(api) + ": cannot open '" + path + "'");
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::istreambuf_iterator<char>(in),
                                                      std::istreambuf_iterator<char>());
  if (in.bad()) throw std::invalid_argument(std::string(api) + ": cannot read '" + path + "'");
  return bytes;
}

// Windows of seq_len + 1 elements of a token stream (`count` elements of dtype t).
std::shared_ptr<const Source> windows(const char* api,
                                      std::shared_ptr<const std::vector<uint8_t>> bytes,
                                      nx::DType t, int64_t count, int64_t seq_len, int64_t stride,
                                      const std::string& what) {
  if (seq_len <= 0)
    throw std::invalid_argument(std::string(api) + ": seq_len must be positive, got " +
                                std::to_string(seq_len));
  if (stride < 0)
    throw std::invalid_argument(std::string(api) +
                                ": stride must be positive (or 0: seq_len), got " +
                                std::to_string(stride));
  if (stride == 0) stride = seq_len;
  if (count < seq_len + 1)
    throw std::invalid_argument(
        std::string(api) + ": " + what + " has " + std::to_string(count) +
        " tokens, fewer than one window of seq_len + 1 = " + std::to_string(seq_len + 1));
  auto s = std::make_shared<Source>();
  s->size = (count - seq_len - 1) / stride + 1;
  int64_t item = ir::itemsize(t);
  for (int64_t offset : {int64_t{0}, item})
    s->columns.push_back(Column{bytes, offset, stride * item, seq_len * item, t, {seq_len}});
  return s;
}

}  // namespace

std::shared_ptr<const Source> source_of(const char* api, const std::vector<nx::Tensor>& leaves,
                                        const std::vector<std::string>& names) {
  std::string a(api);
  if (leaves.empty()) throw std::invalid_argument(a + ": the examples have no tensor leaves");
  for (size_t i = 0; i < leaves.size(); ++i) {
    const nx::Tensor& t = leaves[i];
    if (!t.defined()) throw std::invalid_argument(a + ": " + names[i] + " is an undefined tensor");
    if (t.is_traced())
      throw std::invalid_argument(a + ": " + names[i] + " (" + t.describe() +
                                  ") is a traced value; a dataset holds concrete tensors");
    if (t.ndim() == 0)
      throw std::invalid_argument(a + ": " + names[i] + " (" + t.describe() +
                                  ") has no leading dimension to index examples by");
    if (t.dim(0) != leaves[0].dim(0))
      throw std::invalid_argument(a + ": " + names[i] + " (" + t.describe() + ") has " +
                                  std::to_string(t.dim(0)) + " examples, " + names[0] + " (" +
                                  leaves[0].describe() + ") has " +
                                  std::to_string(leaves[0].dim(0)) +
                                  " (every leaf's leading dimension is the example count)");
  }
  if (leaves[0].dim(0) == 0)
    throw std::invalid_argument(a + ": the dataset is empty (" + names[0] + " is " +
                                leaves[0].describe() + ")");
  auto s = std::make_shared<Source>();
  s->size = leaves[0].dim(0);
  for (const nx::Tensor& t : leaves) {
    nx::Shape row(t.shape().begin() + 1, t.shape().end());
    int64_t row_bytes = ir::numel(row) * ir::itemsize(t.dtype());
    auto bytes = std::make_shared<const std::vector<uint8_t>>(nx::to_bytes(t));
    s->columns.push_back(Column{std::move(bytes), 0, row_bytes, row_bytes, t.dtype(), row});
  }
  return s;
}

std::vector<nx::Tensor> gather(const Source& s, const int64_t* idx, int64_t count, int64_t rows,
                               nx::Device host) {
  std::vector<nx::Tensor> out;
  out.reserve(s.columns.size());
  for (const Column& c : s.columns) {
    nx::Shape shape{rows};
    shape.insert(shape.end(), c.row_shape.begin(), c.row_shape.end());
    uint8_t* dst = nullptr;
    out.push_back(host_tensor(c.dtype, shape, dst, host));
    if (c.row_bytes == 0) continue;
    const uint8_t* base = c.bytes->data() + c.offset;
    auto n = static_cast<size_t>(c.row_bytes);
    int64_t r = 0;
    while (r < count) {
      // Runs of consecutive examples (an unshuffled epoch) are one copy.
      int64_t run = 1;
      while (r + run < count && idx[r + run] == idx[r] + run) ++run;
      if (c.stride == c.row_bytes) {
        std::memcpy(dst + r * n, base + idx[r] * c.stride, n * static_cast<size_t>(run));
      } else {
        for (int64_t j = 0; j < run; ++j)
          std::memcpy(dst + (r + j) * n, base + (idx[r] + j) * c.stride, n);
      }
      r += run;
    }
    if (rows > count) std::memset(dst + count * n, 0, n * static_cast<size_t>(rows - count));
  }
  return out;
}

std::vector<nx::Tensor> take(const char* api, const Source& s, const std::vector<int64_t>& idx) {
  for (int64_t i : idx)
    if (i < 0 || i >= s.size)
      throw std::invalid_argument(std::string(api) + ": index " + std::to_string(i) +
                                  " is out of range for " + std::to_string(s.size) + " examples");
  auto n = static_cast<int64_t>(idx.size());
  return gather(s, idx.data(), n, n);
}

int64_t Plan::batches() const {
  int64_t n = source->size;
  return remainder == Remainder::Drop ? n / batch_size : (n + batch_size - 1) / batch_size;
}

namespace {

// A stable argsort of 32-bit keys: LSD radix, 11 bits a pass.
std::vector<int64_t> stable_argsort(const std::vector<uint32_t>& keys) {
  size_t n = keys.size();
  std::vector<int64_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<int64_t>(i);
  for (int shift = 0; shift < 32; shift += 11) {
    std::vector<size_t> count(2049, 0);
    for (size_t i = 0; i < n; ++i) ++count[((keys[i] >> shift) & 2047) + 1];
    for (size_t d = 1; d < count.size(); ++d) count[d] += count[d - 1];
    for (size_t i = 0; i < n; ++i) {
      int64_t j = a[i];
      b[count[(keys[static_cast<size_t>(j)] >> shift) & 2047]++] = j;
    }
    a.swap(b);
  }
  return a;
}

nx::Tensor host_key(uint32_t k0, uint32_t k1) {
  uint32_t k[2] = {k0, k1};
  return nx::host_from_bytes(nx::DType::UInt32, {2}, k);
}

}  // namespace

std::vector<int64_t> epoch_order(const char* api, int64_t n, const std::optional<nx::Tensor>& key,
                                 int64_t epoch) {
  if (epoch < 0 || epoch > int64_t{0xFFFFFFFF})
    throw std::invalid_argument(std::string(api) + ": epoch must be in [0, 2^32), got " +
                                std::to_string(epoch));
  std::vector<int64_t> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i;
  if (!key) return x;
  // nx::random::permutation(fold_in(key, epoch), n) (core/random.cpp), its rounds' keys and bits
  // drawn with nx::random and its stable argsorts done here on the host: the same order, in a
  // fraction of the time the library's general sort takes (tests/data/test_data.cpp compares).
  nx::Tensor k =
      nx::random::fold_in(nx::place(*key, nx::Device::cpu()), static_cast<uint32_t>(epoch));
  int rounds = static_cast<int>(std::ceil(
      3 * std::log(static_cast<double>(std::max<int64_t>(1, n))) / std::log(4294967295.0)));
  std::vector<int64_t> y(x.size());
  for (int r = 0; r < rounds; ++r) {
    std::vector<uint32_t> ks = nx::to_vector<uint32_t>(nx::random::split(k, 2));
    k = host_key(ks[0], ks[1]);
    std::vector<int64_t> order =
        stable_argsort(nx::to_vector<uint32_t>(nx::random::bits(host_key(ks[2], ks[3]), {n})));
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[static_cast<size_t>(order[i])];
    x.swap(y);
  }
  return x;
}

Plan plan_of(const std::shared_ptr<const Source>& source, const LoaderOptions& o) {
  const std::string a = "rune::data::Loader";
  if (o.batch_size <= 0)
    throw std::invalid_argument(a + ": batch_size must be positive, got " +
                                std::to_string(o.batch_size));
  if (o.prefetch < 0)
    throw std::invalid_argument(a + ": prefetch must be non-negative, got " +
                                std::to_string(o.prefetch));
  if (o.mask_dtype != nx::DType::Float32 && o.mask_dtype != nx::DType::Bool)
    throw std::invalid_argument(a + ": mask_dtype must be float32 or bool, got " +
                                std::string(ir::name(o.mask_dtype)));
  if (o.shuffle_key) {
    const nx::Tensor& k = *o.shuffle_key;
    if (!k.defined()) throw std::invalid_argument(a + ": shuffle_key is an undefined tensor");
    if (k.is_traced() || k.dtype() != nx::DType::UInt32 || k.shape() != nx::Shape{2})
      throw std::invalid_argument(a + ": shuffle_key must be a concrete uint32 [2] key " +
                                  "(nx::random::key), got " + (k.is_traced() ? "traced " : "") +
                                  k.describe());
  }
  if (o.remainder == Remainder::Drop && source->size < o.batch_size)
    throw std::invalid_argument(a + ": batch_size " + std::to_string(o.batch_size) +
                                " is larger than the dataset (" + std::to_string(source->size) +
                                " examples) and Remainder::Drop drops its only, partial batch");
  Plan p;
  p.source = source;
  p.batch_size = o.batch_size;
  p.remainder = o.remainder;
  p.mask_dtype = o.mask_dtype;
  p.device = o.device ? *o.device : nx::default_device();
  runtime::stream_for(p.device, "rune::data::Loader");  // raises for a device not here
  p.prefetch = o.prefetch;
  return p;
}

namespace {

LeafBatch build(const Plan& p, int64_t k) {
  auto n = static_cast<int64_t>(p.order.size());
  int64_t start = k * p.batch_size;
  int64_t count = std::min(p.batch_size, n - start);
  int64_t rows = p.remainder == Remainder::Pad ? p.batch_size : count;
  LeafBatch b;
  // Without a map, a host device's batch is gathered in place; a GPU's is placed below.
  nx::Device host =
      !p.map && p.device.kind == runtime::DeviceKind::CPU ? p.device : nx::Device::cpu();
  b.leaves = gather(*p.source, p.order.data() + start, count, rows, host);
  if (p.map) b.leaves = p.map(std::move(b.leaves));
  uint8_t* m = nullptr;
  b.mask = host_tensor(p.mask_dtype, {rows}, m,
                       p.device.kind == runtime::DeviceKind::CPU ? p.device : nx::Device::cpu());
  if (p.mask_dtype == nx::DType::Bool) {
    std::memset(m, 1, static_cast<size_t>(count));
    std::memset(m + count, 0, static_cast<size_t>(rows - count));
  } else {
    auto* f = reinterpret_cast<float*>(m);
    std::fill(f, f + count, 1.0f);
    std::fill(f + count, f + rows, 0.0f);
  }
  for (nx::Tensor& t : b.leaves)
    if (t.device() != p.device) t = nx::place(t, p.device);
  if (b.mask.device() != p.device) b.mask = nx::place(b.mask, p.device);
  b.valid = count;
  b.index = k;
  return b;
}

}  // namespace

struct EpochCore::Impl {
  Plan plan;
  int64_t batches = 0;
  int64_t built = 0;      // prefetch 0: batches built so far
  bool finished = false;  // consumer: the epoch ended (last batch or an error)
  // The producer's queue: a batch, or the error building it raised.
  using Item = std::variant<LeafBatch, std::exception_ptr>;
  std::mutex mu;
  std::condition_variable space, item;
  std::deque<Item> queue;
  bool stop = false, done = false;
  std::thread thread;

  void produce() {
    for (int64_t k = 0; k < batches; ++k) {
      {
        std::unique_lock l(mu);
        space.wait(l, [&] { return stop || queue.size() < static_cast<size_t>(plan.prefetch); });
        if (stop) break;
      }
      Item it;
      bool failed = false;
      try {
        it = build(plan, k);
      } catch (...) {
        it = std::current_exception();
        failed = true;
      }
      {
        std::lock_guard l(mu);
        queue.push_back(std::move(it));
      }
      item.notify_one();
      if (failed) break;
    }
    {
      std::lock_guard l(mu);
      done = true;
    }
    item.notify_one();
  }
};

EpochCore::EpochCore(Plan plan) : impl_(std::make_unique<Impl>()) {
  impl_->plan = std::move(plan);
  impl_->batches = impl_->plan.batches();
  if (impl_->plan.prefetch > 0) impl_->thread = std::thread([im = impl_.get()] { im->produce(); });
}

EpochCore::~EpochCore() {
  if (impl_->thread.joinable()) {
    {
      std::lock_guard l(impl_->mu);
      impl_->stop = true;
    }
    impl_->space.notify_all();
    impl_->thread.join();
  }
}

int64_t EpochCore::batches() const { return impl_->batches; }

std::optional<LeafBatch> EpochCore::next() {
  Impl& im = *impl_;
  if (im.finished) return std::nullopt;
  if (im.plan.prefetch == 0) {
    if (im.built == im.batches) {
      im.finished = true;
      return std::nullopt;
    }
    try {
      return build(im.plan, im.built++);
    } catch (...) {
      im.finished = true;
      throw;
    }
  }
  Impl::Item it;
  {
    std::unique_lock l(im.mu);
    im.item.wait(l, [&] { return !im.queue.empty() || im.done; });
    if (im.queue.empty()) {
      im.finished = true;
      return std::nullopt;
    }
    it = std::move(im.queue.front());
    im.queue.pop_front();
  }
  im.space.notify_one();
  if (auto* e = std::get_if<std::exception_ptr>(&it)) {
    im.finished = true;
    std::rethrow_exception(*e);
  }
  return std::move(std::get<LeafBatch>(it));
}

}  // namespace detail

Dataset<std::vector<nx::Tensor>> from_npy(const std::vector<std::string>& paths) {
  std::vector<nx::Tensor> leaves;
  std::vector<std::string> names;
  for (const std::string& p : paths) {
    leaves.push_back(nx::load_npy(p));
    names.push_back("'" + p + "'");
  }
  return {detail::source_of("rune::data::from_npy", leaves, names), detail::tokens_of(leaves)};
}

Dataset<std::vector<nx::Tensor>> from_safetensors(const std::string& path,
                                                  const std::vector<std::string>& names) {
  const char* api = "rune::data::from_safetensors";
  nx::TensorMap all = nx::load(path);
  std::vector<nx::Tensor> leaves;
  std::vector<std::string> shown;
  if (names.empty()) {
    for (auto& [name, t] : all) {
      leaves.push_back(t);
      shown.push_back("'" + name + "'");
    }
  } else {
    for (const std::string& name : names) {
      auto it = all.find(name);
      if (it == all.end()) {
        std::string have;
        for (auto& [n, t] : all) have += (have.empty() ? "" : ", ") + n;
        throw std::invalid_argument(std::string(api) + ": '" + path + "' has no tensor '" + name +
                                    "' (it has: " + have + ")");
      }
      leaves.push_back(it->second);
      shown.push_back("'" + name + "'");
    }
  }
  return {detail::source_of(api, leaves, shown), detail::tokens_of(leaves)};
}

Dataset<std::pair<nx::Tensor, nx::Tensor>> from_idx(const std::string& images,
                                                    const std::string& labels) {
  std::pair<nx::Tensor, nx::Tensor> p{nx::load_idx(images), nx::load_idx(labels)};
  return {detail::source_of("rune::data::from_idx", {p.first, p.second},
                            {"'" + images + "'", "'" + labels + "'"}),
          detail::tokens_of(p)};
}

Dataset<std::pair<nx::Tensor, nx::Tensor>> from_text(const std::string& path, int64_t seq_len,
                                                     int64_t stride) {
  const char* api = "rune::data::from_text";
  auto bytes = detail::read_file(api, path);
  auto n = static_cast<int64_t>(bytes->size());
  return {detail::windows(api, std::move(bytes), nx::DType::UInt8, n, seq_len, stride,
                          "'" + path + "'"),
          detail::tokens_of(std::pair<nx::Tensor, nx::Tensor>{})};
}

Dataset<std::pair<nx::Tensor, nx::Tensor>> from_text_files(const std::vector<std::string>& paths,
                                                           int64_t seq_len, int64_t stride) {
  const char* api = "rune::data::from_text_files";
  if (paths.empty()) throw std::invalid_argument(std::string(api) + ": no files");
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  for (const std::string& path : paths) {
    auto b = detail::read_file(api, path);
    bytes->insert(bytes->end(), b->begin(), b->end());
  }
  auto n = static_cast<int64_t>(bytes->size());
  std::string what = "'" + paths[0] + "'";
  if (paths.size() > 1)
    what = "the text of " + std::to_string(paths.size()) + " files (" + what + ", ...)";
  return {detail::windows(api, std::move(bytes), nx::DType::UInt8, n, seq_len, stride, what),
          detail::tokens_of(std::pair<nx::Tensor, nx::Tensor>{})};
}

std::vector<std::string> list_files(const std::string& path,
                                    const std::vector<std::string>& skip_suffixes) {
  const std::string api = "rune::data::list_files";
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::invalid_argument(api + ": '" + path + "' does not exist");
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(path)) {
    std::string name = e.path().filename().string();
    bool skip = name.starts_with(".") || !e.is_regular_file(ec);
    for (const std::string& suffix : skip_suffixes) skip = skip || name.ends_with(suffix);
    if (!skip) files.push_back(e.path().string());
  }
  if (files.empty())
    throw std::invalid_argument(api + ": the directory '" + path + "' has no files to read");
  std::sort(files.begin(), files.end());
  return files;
}

Dataset<std::pair<nx::Tensor, nx::Tensor>> from_tokens(const nx::Tensor& tokens, int64_t seq_len,
                                                       int64_t stride) {
  const char* api = "rune::data::from_tokens";
  if (!tokens.defined() || tokens.ndim() != 1 || tokens.is_traced())
    throw std::invalid_argument(std::string(api) + ": tokens must be a concrete 1-D tensor, got " +
                                (tokens.defined() ? tokens.describe() : "an undefined tensor"));
  auto bytes = std::make_shared<const std::vector<uint8_t>>(nx::to_bytes(tokens));
  return {detail::windows(api, std::move(bytes), tokens.dtype(), tokens.dim(0), seq_len, stride,
                          "the tensor " + tokens.describe()),
          detail::tokens_of(std::pair<nx::Tensor, nx::Tensor>{})};
}

}  // namespace rune::data
