// A character-level GPT trained with one compiled step (issue 18's proof): bytes as the
// vocabulary, a decoder-only transformer (pre-layernorm, learned positions, gelu MLP, dropout),
// AdamW with warmup and cosine decay, global-norm clipping, params and optimizer state donated
// to each step. It prints the loss and tokens per second as it trains, saves a checkpoint,
// resumes from it and checks that the next losses are bit-identical, then samples text.
//
// The text: the plain-text files of Debian's `fortunes` and `fortunes-min` packages
// (/usr/share/games/fortunes; BSD-licensed quotations, redistributable, installed by
// tools/setup-deps), ~2.5 MB of English.
//
// Usage: gpt [--steps N] [--small] [--data FILE|DIR] [--checkpoint FILE] [--sample N]
//            [--logdir DIR]
//   --small: the CI configuration (1 layer, width 32, context 32, batch 4).
//   --logdir: the loss of every step and the tokens per second of every log line as TensorBoard
//   scalars (rune::SummaryWriter; `tensorboard --logdir DIR`). The printed output is the same.
//   --first-step: prints "first_step gpt: setup_us S step_us T loss L" after the first step and
//   exits: the eager set-up (the text as a tensor, the parameters, AdamW's state) and the first
//   compiled step's trace, compile and run (bench/first_step.py).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "trace/rune.h"

namespace optim = rune::optim;
namespace rnd = nx::random;
using nx::Tensor;

struct Config {
  int64_t vocab = 256, context = 128, layers = 4, heads = 4, width = 128, batch = 32;
  double dropout = 0.1, lr = 1e-3, weight_decay = 0.1, clip = 1.0;
  int64_t warmup = 100, steps = 600, log_every = 25;
};

// Parameters: a tree (core/tree.h), so rune::jit, rune::grad, rune::optim and nx::save walk it.
struct Norm {
  Tensor g, b;
};
struct Dense {
  Tensor w, b;
};
struct Block {
  Norm ln1;
  Dense qkv, proj;
  Norm ln2;
  Dense fc, out;
};
struct GPT {
  Tensor wte, wpe;
  std::vector<Block> blocks;
  Norm ln_f;
};
RUNE_TREE(Norm, g, b)
RUNE_TREE(Dense, w, b)
RUNE_TREE(Block, ln1, qkv, proj, ln2, fc, out)
RUNE_TREE(GPT, wte, wpe, blocks, ln_f)
using State = optim::AdamState<GPT>;

GPT init(const Config& c, uint64_t seed) {
  Tensor keys = rnd::split(rnd::key(seed), 2 + 4 * c.layers);
  int64_t next = 0;
  auto normal = [&](nx::Shape s, double std) {
    return rnd::normal(nx::index(keys, 0, next++), s) * std;
  };
  auto norm = [&] {
    return Norm{nx::ones(nx::float32, {c.width}), nx::zeros(nx::float32, {c.width})};
  };
  auto dense = [&](int64_t in, int64_t out, double std) {
    return Dense{normal({in, out}, std), nx::zeros(nx::float32, {out})};
  };
  // GPT-2's initialisation: N(0, 0.02), the residual projections scaled by 1 / sqrt(2 layers).
  double resid = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  GPT p{normal({c.vocab, c.width}, 0.02), normal({c.context, c.width}, 0.02), {}, norm()};
  for (int64_t l = 0; l < c.layers; ++l)
    p.blocks.push_back(
        Block{norm(), dense(c.width, 3 * c.width, 0.02), dense(c.width, c.width, resid), norm(),
              dense(c.width, 4 * c.width, 0.02), dense(4 * c.width, c.width, resid)});
  return p;
}

// x [..., in] @ w + b, as one [rows, in] x [in, out] product.
Tensor dense(const Tensor& x, const Dense& d) {
  nx::Shape s = x.shape();
  int64_t in = s.back();
  s.back() = d.w.shape()[1];
  return nx::reshape(nx::matmul(nx::reshape(x, {-1, in}), d.w) + d.b, s);
}
Tensor norm(const Tensor& x, const Norm& n) { return nx::nn::layer_norm(x, n.g, n.b); }

// Logits [B, T, vocab] of tokens [B, T]; with a key, dropout is on (one fold of the key per site).
Tensor forward(const Config& c, const GPT& p, const Tensor& tokens, const Tensor* key) {
  int64_t B = tokens.shape()[0], T = tokens.shape()[1], C = c.width, H = c.heads, D = C / H;
  uint32_t site = 0;
  auto drop = [&](const Tensor& x) {
    return key ? rnd::dropout(rnd::fold_in(*key, site++), x, c.dropout) : x;
  };
  Tensor x = nx::take(p.wte, tokens, 0) + nx::slice(p.wpe, {{0, T}});
  x = drop(x);
  // Position j may look at position i <= j only.
  Tensor causal = nx::less_equal(nx::iota({T, T}, 1), nx::iota({T, T}, 0));
  auto heads = [&](const Tensor& qkv, int64_t part) {  // [B, T, 3C] -> [B, H, T, D]
    Tensor t = nx::slice(qkv, {{}, {}, {part * C, (part + 1) * C}});
    return nx::permute(nx::reshape(t, {B, T, H, D}), {0, 2, 1, 3});
  };
  for (const Block& blk : p.blocks) {
    Tensor qkv = dense(norm(x, blk.ln1), blk.qkv);
    Tensor q = heads(qkv, 0), k = heads(qkv, 1), v = heads(qkv, 2);
    Tensor att =
        nx::matmul(q, nx::permute(k, {0, 1, 3, 2})) * (1 / std::sqrt(static_cast<double>(D)));
    att = nx::where(causal, att, nx::scalar_like(att, -INFINITY));
    att = drop(nx::softmax(att, -1));
    Tensor y = nx::reshape(nx::permute(nx::matmul(att, v), {0, 2, 1, 3}), {B, T, C});
    x = x + drop(dense(y, blk.proj));
    x = x + drop(dense(nx::gelu(dense(norm(x, blk.ln2), blk.fc)), blk.out));
  }
  x = norm(x, p.ln_f);
  // The output projection is the input embedding's transpose (tied, as GPT-2).
  return nx::reshape(nx::matmul(nx::reshape(x, {B * T, C}), nx::transpose(p.wte)), {B, T, c.vocab});
}

std::string read_text(const std::string& path) {
  struct stat st {};
  std::vector<std::string> files;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n[0] == '.' || n.ends_with(".dat") || n.ends_with(".u8")) continue;
        files.push_back(path + "/" + n);
      }
      closedir(d);
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  return text;
}

std::string bar(int64_t done, int64_t total, int width = 20) {
  int64_t filled = total > 0 ? done * width / total : width;
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '.') + "]";
}

int main(int argc, char** argv) {
  Config c;
  std::string data_path = "/usr/share/games/fortunes", ckpt = "";
  int64_t sample_len = 300;
  std::string logdir;
  bool bench_json = false;  // a last line for bench/run: the median step time (bench/table.py)
  bool first_step = false;  // bench/first_step.py: time the set-up and the first step, then exit
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpt: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--steps")
      c.steps = std::stoll(value());
    else if (a == "--small") {
      c.context = 32, c.layers = 1, c.heads = 2, c.width = 32, c.batch = 4, c.warmup = 5;
      c.log_every = 5, c.lr = 3e-3;
    } else if (a == "--data")
      data_path = value();
    else if (a == "--checkpoint")
      ckpt = value();
    else if (a == "--sample")
      sample_len = std::stoll(value());
    else if (a == "--logdir")
      logdir = value();
    else if (a == "--bench-json")
      bench_json = true;
    else if (a == "--first-step")
      first_step = true;
    else {
      std::fprintf(
          stderr,
          "usage: gpt [--steps N] [--small] [--data FILE|DIR] [--checkpoint FILE] [--sample N] "
          "[--logdir DIR] [--bench-json] [--first-step]\n");
      return 2;
    }
  }
  if (ckpt.empty()) ckpt = "/tmp/rune-gpt-" + std::to_string(::getpid()) + ".safetensors";
  std::string text = read_text(data_path);
  if (text.size() < static_cast<size_t>(c.context + 2)) {
    std::fprintf(stderr,
                 "gpt: no training text at %s (apt-get install fortunes fortunes-min, or --data)\n",
                 data_path.c_str());
    return 1;
  }
  auto t_setup = std::chrono::steady_clock::now();
  std::vector<double> bytes(text.begin(), text.end());
  for (double& b : bytes) b = static_cast<double>(static_cast<unsigned char>(b));
  Tensor data = nx::create(nx::int32, {static_cast<int64_t>(bytes.size())}, bytes);

  auto opt =
      optim::adamw(optim::warmup_cosine_decay(0, c.lr, c.warmup, std::max(c.steps, c.warmup + 1)),
                   0.9, 0.95, 1e-8, c.weight_decay,
                   [](const std::string&, const Tensor& t) { return t.shape().size() >= 2; });
  int64_t T = c.context, B = c.batch, n_offsets = static_cast<int64_t>(bytes.size()) - T - 1;
  // One training step, compiled once: sample a batch on the device from the step's key, the
  // loss and its gradient, clipping, the AdamW update. Params and state are consumed.
  auto step = rune::jit(rune::Signature().consume(0).consume(1), [&](GPT p, State s,
                                                                     Tensor text_ids,
                                                                     Tensor base_key) {
    Tensor k = rnd::fold_in(base_key, s.count);
    Tensor ks = rnd::split(k, 2);
    Tensor starts = rnd::randint(nx::index(ks, 0, 0), {B, 1}, 0, n_offsets);
    Tensor window = nx::take(text_ids, starts + nx::cast(nx::iota({1, T + 1}, 1), nx::int32), 0);
    Tensor x = nx::slice(window, {{}, {0, T}}), y = nx::slice(window, {{}, {1, T + 1}});
    Tensor drop_key = nx::index(ks, 0, 1);
    auto loss_of = [&](const GPT& q) {
      return nx::nn::cross_entropy(forward(c, q, x, &drop_key), y);
    };
    auto [loss, g] = rune::value_and_grad(loss_of, p);
    auto [p2, s2] = opt.update(p, optim::clip_by_global_norm(g, c.clip), s);
    return std::make_tuple(loss, p2, s2);
  });

  Tensor base_key = rnd::key(1234);
  GPT p = init(c, 0);
  State s = opt.init(p);
  int64_t n_params = 0;
  for (const auto& leaf : rune::tree_leaves(p)) n_params += leaf.size();
  std::printf(
      "gpt: %lld layers, %lld heads, width %lld, context %lld, batch %lld: %lld parameters; "
      "%zu bytes of text\n",
      (long long)c.layers, (long long)c.heads, (long long)c.width, (long long)T, (long long)B,
      (long long)n_params, text.size());

  if (first_step) {
    nx::wait(s.count);
    auto t_step = std::chrono::steady_clock::now();
    Tensor loss;
    std::tie(loss, p, s) = step(p, s, data, base_key);
    float l = nx::item<float>(loss);
    auto us = [](auto a, auto b) {
      return std::chrono::duration<double, std::micro>(b - a).count();
    };
    std::printf("first_step gpt: setup_us %.0f step_us %.0f loss %.6f\n", us(t_setup, t_step),
                us(t_step, std::chrono::steady_clock::now()), l);
    return 0;
  }
  int64_t resume_at = c.steps / 2, check = std::min<int64_t>(3, c.steps - resume_at);
  std::vector<float> losses;
  std::vector<double> step_us;  // each step's time, the loss read back included
  std::unique_ptr<rune::SummaryWriter> summary;
  if (!logdir.empty()) summary = std::make_unique<rune::SummaryWriter>(logdir);
  auto t0 = std::chrono::steady_clock::now(), t_log = t0;
  for (int64_t i = 0; i < c.steps; ++i) {
    if (i == resume_at) nx::save(ckpt, std::make_pair(p, s));
    auto t_step = std::chrono::steady_clock::now();
    Tensor loss;
    std::tie(loss, p, s) = step(p, s, data, base_key);
    losses.push_back(nx::item<float>(loss));
    if (summary) summary->add_scalar("train/loss", losses.back(), i);
    step_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t_step)
            .count());
    if ((i + 1) % c.log_every == 0 || i + 1 == c.steps) {
      auto now = std::chrono::steady_clock::now();
      double dt = std::chrono::duration<double>(now - t_log).count();
      int64_t n = std::min<int64_t>(50, static_cast<int64_t>(losses.size()));
      double mean = std::accumulate(losses.end() - n, losses.end(), 0.0) / static_cast<double>(n);
      int64_t since = (i + 1) % c.log_every == 0 ? c.log_every : (i + 1) % c.log_every;
      std::printf("step %5lld/%lld %s loss %.3f (mean of last %lld: %.3f)  %.0f tok/s\n",
                  (long long)(i + 1), (long long)c.steps, bar(i + 1, c.steps).c_str(),
                  losses.back(), (long long)n, mean, static_cast<double>(since * B * T) / dt);
      std::fflush(stdout);
      if (summary) {
        summary->add_scalar("train/tokens_per_s", static_cast<double>(since * B * T) / dt, i);
        summary->flush();  // TensorBoard sees each log line as it is printed
      }
      t_log = now;
    }
  }
  double minutes =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60;
  int64_t k = std::min<int64_t>(5, c.steps / 2);
  double first = std::accumulate(losses.begin(), losses.begin() + k, 0.0) / static_cast<double>(k);
  double last = std::accumulate(losses.end() - k, losses.end(), 0.0) / static_cast<double>(k);
  std::printf("trained %lld steps in %.1f minutes; loss %.3f -> %.3f (means of %lld steps): %s\n",
              (long long)c.steps, minutes, first, last, (long long)k,
              last < first ? "falls" : "does not fall");
  if (!(last < first)) return 1;

  // Resume: load the checkpoint of step `resume_at` into a fresh tree and replay the next steps.
  if (check > 0) {
    auto fresh = std::make_pair(init(c, 99), opt.init(init(c, 99)));
    nx::load_into(ckpt, fresh);
    GPT rp = fresh.first;
    State rs = fresh.second;
    bool same = true;
    for (int64_t i = 0; i < check; ++i) {
      Tensor loss;
      std::tie(loss, rp, rs) = step(rp, rs, data, base_key);
      float l = nx::item<float>(loss), want = losses[static_cast<size_t>(resume_at + i)];
      same = same && std::memcmp(&l, &want, sizeof l) == 0;
    }
    std::printf("resumed from the checkpoint of step %lld: the next %lld losses are %s\n",
                (long long)resume_at, (long long)check, same ? "bit-identical" : "DIFFERENT");
    std::remove(ckpt.c_str());
    if (!same) return 1;
  }

  // Sampling: one compiled call per byte over a fixed [1, T] window (so it traces once), the
  // byte drawn from softmax(logits / 0.8) by the Gumbel-max trick.
  auto next_byte =
      rune::jit([&](const GPT& q, const Tensor& window, const Tensor& pos, const Tensor& key) {
        Tensor logits =
            nx::take(nx::index(forward(c, q, window, nullptr), 0, 0), pos, 0);  // [vocab]
        Tensor u = rnd::uniform(key, {c.vocab}, nx::float32, 1e-7, 1);
        return nx::argmax(logits / 0.8 - nx::log(-nx::log(u)));
      });
  std::string prompt = "The ";
  std::vector<double> win(static_cast<size_t>(T), 32);
  std::string out = prompt;
  Tensor gen_key = rnd::key(7);
  for (int64_t i = 0; i < sample_len; ++i) {
    int64_t len = static_cast<int64_t>(out.size());
    int64_t start = std::max<int64_t>(0, len - T);
    for (int64_t j = 0; j < T; ++j)
      win[static_cast<size_t>(j)] =
          start + j < len ? static_cast<unsigned char>(out[static_cast<size_t>(start + j)]) : 32;
    Tensor pos = nx::scalar(nx::int32, static_cast<double>(std::min(len, T) - 1));
    Tensor b = next_byte(p, nx::create(nx::int32, {1, T}, win), pos,
                         rnd::fold_in(gen_key, static_cast<uint32_t>(i)));
    out.push_back(static_cast<char>(nx::item<int64_t>(b)));
  }
  std::printf("sample (%lld bytes, temperature 0.8):\n%s\n", (long long)sample_len, out.c_str());
  if (bench_json && step_us.size() > 3) {
    // The median over the steps after the first three (the first compiles).
    std::vector<double> t(step_us.begin() + 3, step_us.end());
    std::sort(t.begin(), t.end());
    double median = t[t.size() / 2];
    std::printf(
        "{\"results\": [{\"name\": \"gpt_step\", \"rune_us\": %.1f}], \"notes\": "
        "{\"gpt_step_tokens_per_s\": \"%.0f\", \"gpt_step_loss\": \"%.3f -> %.3f\"}}\n",
        median, static_cast<double>(B * T) / (median * 1e-6), first, last);
  }
  return 0;
}
