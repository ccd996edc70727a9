// rune::data (docs/data.md): datasets of examples and a loader that cuts them into batches.
//
// A Dataset<T> is a tree T of tensors (core/tree.h: a tensor, pair, tuple, vector, RUNE_TREE
// struct, ...) whose leaves share their leading dimension, the example count; its bytes are held
// on the host. Constructors read .npy files, a .safetensors (or .npz) file, IDX files and text
// (bytes as uint8 tokens, windows of seq_len + 1 as (x, y) pairs).
//
// A Loader<T> gives the batches of an epoch: `for (auto batch : loader.epoch(e))`. Each batch is
// a Batch<T>: the examples' tree with batch_size rows (leading dimension), a mask of its real
// rows, and host counts. The order is the dataset's, or, with a shuffle key,
// nx::random::permutation(nx::random::fold_in(key, epoch), n), computed on the host: the same
// batches for the same key on every device. The last partial batch is padded (zero rows, mask 0:
// every batch has one shape, so a compiled step never retraces), dropped, or kept short. Batches
// are built (gathered, transformed, placed on the loader's device) on a host thread up to
// `prefetch` batches ahead; an error there is raised by the next() that would have returned
// that batch, and destroying the epoch mid-way stops and joins the thread.
#pragma once
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "core/tree.h"
#include "trace/tree_util.h"

namespace rune::data {

// The last batch of an epoch when batch_size does not divide the example count.
enum class Remainder {
  Pad,   // padded to batch_size with zero rows, their mask 0 (one shape for every batch)
  Drop,  // left out (every example is still seen over epochs when shuffling)
  Keep,  // a shorter batch (a new shape: a compiled step traces again for it)
};

namespace detail {

// One leaf of a dataset, on the host: example i is `row_bytes` bytes at
// `bytes->data() + offset + i * stride` (stride == row_bytes for arrays; the windows of a token
// stream overlap), of dtype `dtype` and shape `row_shape`.
struct Column {
  std::shared_ptr<const std::vector<uint8_t>> bytes;
  int64_t offset = 0, stride = 0, row_bytes = 0;
  nx::DType dtype = nx::DType::Float32;
  nx::Shape row_shape;
};

struct Source {
  int64_t size = 0;  // examples
  std::vector<Column> columns;
};

// A source from the leaves of a tree (named by `names` in messages): checks that each has a
// leading dimension, the same one, and at least one example; reads each to the host.
std::shared_ptr<const Source> source_of(const char* api, const std::vector<nx::Tensor>& leaves,
                                        const std::vector<std::string>& names);

// Tensors of the examples idx[0..count), padded with zero rows to `rows`, on `host` (the CPU or
// another host device).
std::vector<nx::Tensor> gather(const Source& s, const int64_t* idx, int64_t count, int64_t rows,
                               nx::Device host = nx::Device::cpu());
// Checks indices against the source's size (naming `api`) and gathers them.
std::vector<nx::Tensor> take(const char* api, const Source& s, const std::vector<int64_t>& idx);

// A transformation of a batch's leaves, run where the batch is built.
using LeafMap = std::function<std::vector<nx::Tensor>(std::vector<nx::Tensor>)>;

struct Options;  // LoaderOptions, checked

// One batch as leaves.
struct LeafBatch {
  std::vector<nx::Tensor> leaves;
  nx::Tensor mask;
  int64_t valid = 0, index = 0;
};

// What an epoch needs: the order of its examples and how to cut, build and place them.
struct Plan {
  std::shared_ptr<const Source> source;
  std::vector<int64_t> order;  // the example indices of the epoch, in order
  int64_t batch_size = 1;
  Remainder remainder = Remainder::Pad;
  nx::DType mask_dtype = nx::DType::Float32;
  nx::Device device;
  int prefetch = 2;
  LeafMap map;  // empty: none
  int64_t batches() const;
};

// The batches of one epoch, built on a producer thread (prefetch > 0) or in next().
class EpochCore {
 public:
  explicit EpochCore(Plan plan);
  ~EpochCore();  // stops the producer and joins it (a batch being built is finished first)
  EpochCore(const EpochCore&) = delete;
  EpochCore& operator=(const EpochCore&) = delete;
  std::optional<LeafBatch> next();
  int64_t batches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The example order of `epoch` (n examples): 0..n-1 without a key, else
// nx::random::permutation(nx::random::fold_in(key, epoch), n) on the host.
std::vector<int64_t> epoch_order(const char* api, int64_t n, const std::optional<nx::Tensor>& key,
                                 int64_t epoch);

template <class T>
std::vector<int64_t> tokens_of(const T& tree) {
  Flat f;
  Tree<T>::flatten(tree, f, "");
  return std::move(f.tokens);
}

}  // namespace detail

// A tree of tensors whose leaves share their leading dimension (the examples), held on the host.
template <class T>
class Dataset {
 public:
  // Reads each leaf to the host (a copy). Raises std::invalid_argument, naming the leaf by its
  // tree path, for a leaf without a leading dimension, leading dimensions that differ, or no
  // examples.
  explicit Dataset(const T& examples) {
    auto f = rune::detail::flatten_with_paths(examples);
    std::vector<std::string> names;
    for (const auto& p : f.paths) names.push_back(p.empty() ? "the tensor" : "leaf `" + p + "`");
    source_ = detail::source_of("rune::data::Dataset", f.flat.leaves, names);
    tokens_ = std::move(f.flat.tokens);
  }
  // A dataset of an existing source (the file constructors).
  Dataset(std::shared_ptr<const detail::Source> source, std::vector<int64_t> tokens)
      : source_(std::move(source)), tokens_(std::move(tokens)) {}

  int64_t size() const { return source_->size; }
  // The examples at `indices`, in that order, as host tensors (an index out of range raises).
  T take(const std::vector<int64_t>& indices) const {
    return rune::detail::rebuild<T>(detail::take("rune::data::Dataset::take", *source_, indices),
                                    tokens_);
  }
  const std::shared_ptr<const detail::Source>& source() const { return source_; }
  const std::vector<int64_t>& tokens() const { return tokens_; }

 private:
  std::shared_ptr<const detail::Source> source_;
  std::vector<int64_t> tokens_;
};

template <class T>
Dataset<T> from_arrays(const T& examples) {
  return Dataset<T>(examples);
}
// One tensor per .npy file (nx::load_npy), in the order given.
Dataset<std::vector<nx::Tensor>> from_npy(const std::vector<std::string>& paths);
// The tensors `names` of a .safetensors file (or .npz: nx::load), in that order; every tensor of
// the file, in name order, when `names` is empty.
Dataset<std::vector<nx::Tensor>> from_safetensors(const std::string& path,
                                                  const std::vector<std::string>& names = {});
// (images, labels) from two IDX files (nx::load_idx; gzip-compressed too), e.g. Fashion-MNIST's
// train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz: uint8 [n, 28, 28] and uint8 [n].
Dataset<std::pair<nx::Tensor, nx::Tensor>> from_idx(const std::string& images,
                                                    const std::string& labels);
// A file's bytes as uint8 tokens, cut into windows of seq_len + 1 tokens starting every `stride`
// tokens (0: stride = seq_len, so each token after the first is a target once): example k is
// (x, y) = (tokens[s, s + seq_len), tokens[s + 1, s + seq_len + 1)), s = k * stride, both uint8
// [seq_len]. The windows are not copied: each batch is gathered from the one byte stream.
Dataset<std::pair<nx::Tensor, nx::Tensor>> from_text(const std::string& path, int64_t seq_len,
                                                     int64_t stride = 0);
// The same windows over the bytes of several files joined in the order given (a corpus split into
// files; nothing is inserted between them, so a window may span two files). At least one path.
Dataset<std::pair<nx::Tensor, nx::Tensor>> from_text_files(const std::vector<std::string>& paths,
                                                           int64_t seq_len, int64_t stride = 0);
// The files a path names, for from_text_files: a file gives itself; a directory gives its regular
// files (links to files too) in name order, except hidden ones (".name") and names ending in one
// of skip_suffixes (e.g. {".dat"} for an index beside each text). Raises when the path does not
// exist or the directory has no such file.
std::vector<std::string> list_files(const std::string& path,
                                    const std::vector<std::string>& skip_suffixes = {});
// The same windows over a 1-D tensor of tokens (any dtype).
Dataset<std::pair<nx::Tensor, nx::Tensor>> from_tokens(const nx::Tensor& tokens, int64_t seq_len,
                                                       int64_t stride = 0);

struct LoaderOptions {
  int64_t batch_size = 0;                     // required, positive
  std::optional<nx::Tensor> shuffle_key;      // a uint32 [2] key (nx::random::key); none: in order
  Remainder remainder = Remainder::Pad;       // the last partial batch
  nx::DType mask_dtype = nx::DType::Float32;  // Float32 (1 / 0) or Bool
  std::optional<nx::Device> device;           // where batches go; nx::default_device() when unset
  int prefetch = 2;  // batches built ahead on a host thread; 0: built in next(), no thread
};

// A batch: `data` has the tree of the dataset, each leaf with `rows` (batch_size, or fewer for a
// kept remainder) as leading dimension; mask [rows] is 1 (true) for the `valid` real examples,
// 0 for padding; `index` is the batch's number in its epoch.
template <class T>
struct Batch {
  T data;
  nx::Tensor mask;
  int64_t valid = 0;
  int64_t index = 0;
};

template <class T>
class Epoch {
 public:
  Epoch(detail::Plan plan, std::vector<int64_t> tokens)
      : core_(std::make_unique<detail::EpochCore>(std::move(plan))), tokens_(std::move(tokens)) {}
  // The next batch, or std::nullopt after the last. Raises what building this batch raised
  // (on the producer thread or here); the epoch then ends.
  std::optional<Batch<T>> next() {
    std::optional<detail::LeafBatch> b = core_->next();
    if (!b) return std::nullopt;
    return Batch<T>{rune::detail::rebuild<T>(b->leaves, tokens_), std::move(b->mask), b->valid,
                    b->index};
  }
  int64_t batches() const { return core_->batches(); }

  // Single pass: begin() takes the first batch.
  class iterator {
   public:
    using value_type = Batch<T>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(Epoch* e) : e_(e), cur_(e->next()) {}
    Batch<T>& operator*() { return *cur_; }
    Batch<T>* operator->() { return &*cur_; }
    iterator& operator++() {
      cur_.reset();  // the batch is released before the next is waited for
      cur_ = e_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !cur_.has_value(); }

   private:
    Epoch* e_ = nullptr;
    std::optional<Batch<T>> cur_;
  };
  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() { return {}; }

 private:
  std::unique_ptr<detail::EpochCore> core_;
  std::vector<int64_t> tokens_;
};

namespace detail {
// Checks the options (errors name rune::data::Loader) and resolves the device.
Plan plan_of(const std::shared_ptr<const Source>& source, const LoaderOptions& o);
}  // namespace detail

template <class T>
class Loader {
 public:
  // Raises std::invalid_argument, naming rune::data::Loader and the value, for batch_size <= 0,
  // prefetch < 0, a mask dtype other than float32 or bool, a shuffle key that is not uint32 [2],
  // or a dropped remainder that leaves no batch.
  Loader(Dataset<T> data, LoaderOptions options)
      : data_(std::move(data)),
        options_(std::move(options)),
        plan_(detail::plan_of(data_.source(), options_)) {}

  // f runs on each batch's data where the batch is built (the producer thread), on host tensors,
  // before the batch is placed on the device: decoding, normalisation, augmentation. It must
  // return a tree of T's structure.
  Loader& map(std::function<T(T)> f) {
    std::vector<int64_t> tokens = data_.tokens();
    plan_.map = [f = std::move(f), tokens](std::vector<nx::Tensor> leaves) {
      T out = f(rune::detail::rebuild<T>(leaves, tokens));
      Flat flat;
      Tree<T>::flatten(out, flat, "");
      if (flat.tokens != tokens)
        throw std::invalid_argument(
            "rune::data::Loader::map: f returned a tree of another structure than its argument");
      return std::move(flat.leaves);
    };
    return *this;
  }

  // The batches of epoch e (0 <= e < 2^32). With prefetch > 0 a producer thread starts building
  // them now.
  Epoch<T> epoch(int64_t e) const {
    detail::Plan p = plan_;
    p.order = order(e);
    return Epoch<T>(std::move(p), data_.tokens());
  }
  // The example indices of epoch e in the order the batches take them.
  std::vector<int64_t> order(int64_t e) const {
    return detail::epoch_order("rune::data::Loader::epoch", data_.size(), options_.shuffle_key, e);
  }
  int64_t batches() const { return plan_.batches(); }  // per epoch
  const Dataset<T>& dataset() const { return data_; }
  const LoaderOptions& options() const { return options_; }
  nx::Device device() const { return plan_.device; }

 private:
  Dataset<T> data_;
  LoaderOptions options_;
  detail::Plan plan_;
};

}  // namespace rune::data
