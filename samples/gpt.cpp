// A character-level GPT trained with one compiled step (issue 18): bytes as the vocabulary,
// rune::nn's GPT-2 (dropout 0.1 in training) in a small size, AdamW with warmup and cosine decay,
// global-norm clipping, params and optimizer state donated. It prints the loss and tokens per
// second, saves a checkpoint, resumes from it and checks that the next losses are bit-identical,
// then samples text. The text: Debian's `fortunes` (/usr/share/games/fortunes), ~2.5 MB in windows
// of T + 1 bytes that a rune::data loader shuffles and batches on a host thread while the step
// runs. Issue 18's model and math, other draws and losses (docs/performance.md, "The GPT step").
// Options: --steps N, --small (CI's: 1 layer, width 32, context 32, batch 4), --data FILE|DIR,
// --checkpoint FILE, --sample N, --logdir DIR (TensorBoard scalars), --first-step (the set-up and
// first step's times, for bench/first_step.py).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "trace/data.h"

namespace data = rune::data;
namespace nn = rune::nn;
namespace optim = rune::optim;
namespace rnd = nx::random;
using nx::Tensor;
using State = optim::AdamState<nn::GPT2>;
using XY = std::pair<Tensor, Tensor>;  // uint8 [batch, T]: bytes, and the bytes after them

int main(int argc, char** argv) try {
  nn::GPT2Config g{.vocab_size = 256, .n_positions = 128, .n_embd = 128, .n_layer = 4, .n_head = 4};
  int64_t batch = 32, warmup = 100, steps = 600, log_every = 25, sample_len = 300;
  double lr = 1e-3;
  std::string path = "/usr/share/games/fortunes", logdir;
  std::string ckpt = "/tmp/rune-gpt-" + std::to_string(::getpid()) + ".safetensors";
  bool first_step = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--small") {
      g.n_positions = 32, g.n_layer = 1, g.n_head = 2, g.n_embd = 32, batch = 4, warmup = 5;
      log_every = 5, lr = 3e-3;
    } else if (a == "--first-step") {
      first_step = true;
    } else if (i + 1 < argc && (a == "--steps" || a == "--sample")) {
      (a == "--steps" ? steps : sample_len) = std::stoll(argv[++i]);
    } else if (i + 1 < argc && (a == "--data" || a == "--checkpoint" || a == "--logdir")) {
      (a == "--data" ? path : a == "--logdir" ? logdir : ckpt) = argv[++i];
    } else {
      std::fprintf(stderr, "gpt: unknown option or missing value: %s\n", a.c_str());
      return 2;
    }
  }
  const int64_t T = g.n_positions;
  auto t_setup = std::chrono::steady_clock::now();  // the loader, the parameters, AdamW's state
  data::Loader<XY> loader(
      data::from_text_files(data::list_files(path, {".dat", ".u8"}), T),  // not fortune's indexes
      {.batch_size = batch, .shuffle_key = rnd::key(1234), .remainder = data::Remainder::Drop});
  // AdamW, weight decay 0.1 on the matrices.
  auto opt = optim::adamw(optim::warmup_cosine_decay(0, lr, warmup, std::max(steps, warmup + 1)),
                          0.9, 0.95, 1e-8, 0.1,
                          [](const std::string&, const Tensor& t) { return t.ndim() >= 2; });
  // One training step, compiled once: the loss and its gradient (dropout keyed by the step
  // count), clipping at global norm 1, the AdamW update. Params and state are consumed.
  auto train_step = [&](nn::GPT2 p, State s, Tensor x, Tensor y, Tensor key) {
    auto loss_of = [&](const nn::GPT2& q) {
      nn::Context ctx = nn::Context::train(rnd::fold_in(key, s.count));
      return nx::nn::cross_entropy(q(x, ctx), y);
    };
    auto [loss, grad] = rune::value_and_grad(loss_of, p);
    auto [p2, s2] = opt.update(p, optim::clip_by_global_norm(grad, 1), s);
    return std::make_tuple(loss, p2, s2);
  };
  auto step = rune::jit(rune::Signature().consume(0).consume(1), train_step);
  // GPT-2's initialisation: N(0, 0.02), the residual projections N(0, 0.02^2 / (2 layers)).
  nn::GPT2 p = nn::GPT2::init(rnd::key(0), g);
  State s = opt.init(p);
  std::printf("gpt: %lld parameters, batches of %lld x %lld bytes\n",
              (long long)nn::count_params(p), (long long)batch, (long long)T);
  const Tensor key = rnd::key(1234);
  auto us = [](auto t) { return std::chrono::duration<double, std::micro>(t).count(); };
  if (first_step) {  // the first step: its trace, compile and run, its batch ready
    XY b = loader.epoch(0).next()->data;
    auto t = std::chrono::steady_clock::now();
    float l = nx::item<float>(std::get<0>(step(p, s, b.first, b.second, key)));
    std::printf("first_step gpt: setup_us %.0f step_us %.0f loss %.6f\n", us(t - t_setup),
                us(std::chrono::steady_clock::now() - t), l);
    return 0;
  }
  const int64_t resume_at = steps / 2, check = std::min<int64_t>(3, steps - resume_at);
  std::vector<float> losses;
  auto mean = [&](int64_t from, int64_t n) {  // of the losses of steps [from, from + n)
    return std::accumulate(losses.begin() + from, losses.begin() + from + n, 0.0) / n;
  };
  std::vector<double> step_s;  // each step's time: the wait for its batch, the step, the loss read
  std::vector<XY> replay;      // the batches of the steps after the checkpoint
  std::optional<rune::SummaryWriter> summary;
  if (!logdir.empty()) summary.emplace(logdir);
  auto t0 = std::chrono::steady_clock::now(), t_step = t0, t_log = t0;
  for (int64_t epoch = 0, i = 0; i < steps; ++epoch) {
    for (auto b : loader.epoch(epoch)) {
      if (i == resume_at) nx::save(ckpt, std::make_pair(p, s));
      if (i >= resume_at && i < resume_at + check) replay.push_back(b.data);
      Tensor loss;
      std::tie(loss, p, s) = step(p, s, b.data.first, b.data.second, key);
      losses.push_back(nx::item<float>(loss));
      auto now = std::chrono::steady_clock::now();
      step_s.push_back(us(now - t_step) * 1e-6), t_step = now;
      if (summary) summary->add_scalar("train/loss", losses.back(), i);
      if (++i % log_every == 0 || i == steps) {
        int64_t n = std::min<int64_t>(50, i), since = (i - 1) % log_every + 1;
        double tok_s = since * batch * T / std::chrono::duration<double>(t_step - t_log).count();
        std::printf("step %5lld/%lld loss %.3f (mean of last %lld: %.3f)  %.0f tok/s\n",
                    (long long)i, (long long)steps, losses.back(), (long long)n, mean(i - n, n),
                    tok_s);
        std::fflush(stdout);
        if (summary) summary->add_scalar("train/tokens_per_s", tok_s, i - 1), summary->flush();
        t_log = t_step;
      }
      if (i == steps) break;
    }
  }
  int64_t k = std::min<int64_t>(5, steps / 2);
  double first = mean(0, k), last = mean(steps - k, k);
  size_t skip = std::min<size_t>(3, step_s.size() / 2);  // the median after the first 3 steps
  std::sort(step_s.begin() + skip, step_s.end());
  double median = step_s.empty() ? 0 : step_s[skip + (step_s.size() - skip) / 2];
  std::printf(
      "trained %lld steps in %.1f minutes (median step %.1f ms, %.0f tok/s); loss %.3f -> "
      "%.3f (means of %lld steps): %s\n",
      (long long)steps, std::chrono::duration<double>(t_step - t0).count() / 60, median * 1e3,
      batch * T / median, first, last, (long long)k, last < first ? "falls" : "does not fall");
  if (!(last < first)) return 1;
  // Resume: load the checkpoint of step `resume_at` into a fresh tree and replay the next steps.
  if (check > 0) {
    auto fresh = std::make_pair(nn::GPT2::init(rnd::key(99), g), opt.init(p));
    nx::load_into(ckpt, fresh);
    std::remove(ckpt.c_str());
    bool same = true;
    for (int64_t i = 0; i < check; ++i) {
      Tensor loss;
      std::tie(loss, fresh.first, fresh.second) =
          step(fresh.first, fresh.second, replay[i].first, replay[i].second, key);
      same = same && nx::item<float>(loss) == losses[resume_at + i];  // positive, not NaN
    }
    std::printf("resumed from the checkpoint of step %lld: the next %lld losses are %s\n",
                (long long)resume_at, (long long)check, same ? "bit-identical" : "DIFFERENT");
    if (!same) return 1;
  }
  // Sampling: one compiled call per byte on the last T bytes (spaces before them, so it traces
  // once), the byte drawn from softmax(logits / 0.8) by the Gumbel-max trick.
  auto next_byte = rune::jit([T](const nn::GPT2& q, const Tensor& w, const Tensor& key) {
    Tensor u = rnd::uniform(key, {256}, nx::float32, 1e-7, 1);
    return nx::argmax(nx::index(nx::index(q(w), 0, 0), 0, T - 1) / 0.8 - nx::log(-nx::log(u)));
  });
  std::string out = "The ";
  for (uint32_t i = 0; i < sample_len; ++i) {
    std::string w = std::string(T, ' ') + out;
    Tensor b = next_byte(p, nx::from_bytes(nx::uint8, {1, T}, w.data() + w.size() - T),
                         rnd::fold_in(rnd::key(7), i));
    out.push_back(static_cast<char>(nx::item<int64_t>(b)));
  }
  std::printf("sample (%lld bytes, temperature 0.8):\n%s\n", (long long)sample_len, out.c_str());
} catch (const std::exception& e) {  // e.g. no text: apt-get install fortunes, or --data
  std::fprintf(stderr, "gpt: %s\n", e.what());
  return 1;
}
