// A character-level RNN trained with rune::scan (issue 20): h <- tanh(x W_xh + h W_hh + b_h)
// over the characters of a short text, each step predicting the next character. The loss over a
// sequence is one rune::scan; the training step (the loss, its gradient and an SGD update) is one
// compiled program in which the scan and its gradient are two loop steps, whatever the sequence's
// length (docs/compilation.md "Control flow"). After training, greedy decoding is a scan too:
// each step feeds back the character it predicted.
#include <cstdio>
#include <string>
#include <vector>

#include "trace/rune.h"
#include "trace/staged_program.h"  // rune::loop_step_iterations

using nx::Tensor;

struct Rnn {
  Tensor w_xh, w_hh, b_h, w_hy, b_y;
};
RUNE_TREE(Rnn, w_xh, w_hh, b_h, w_hy, b_y)

// One step: the new hidden state [1, H] and the next character's logits [1, V].
std::pair<Tensor, Tensor> cell(const Rnn& m, const Tensor& h, const Tensor& x) {
  Tensor next = nx::tanh(nx::matmul(x, m.w_xh) + nx::matmul(h, m.w_hh) + m.b_h);
  return {next, nx::matmul(next, m.w_hy) + m.b_y};
}

int main() {
  const std::string text = "hello rune, hello scan. ";
  std::string vocab;
  for (char c : text)
    if (vocab.find(c) == std::string::npos) vocab += c;
  const int64_t V = static_cast<int64_t>(vocab.size()), H = 32;
  const int64_t T = static_cast<int64_t>(text.size());
  // Inputs: each character as a one-hot row [1, V]; targets: the character after it (cyclic).
  std::vector<double> in, target;
  for (int64_t t = 0; t < T; ++t) {
    int64_t a = static_cast<int64_t>(vocab.find(text[t]));
    int64_t b = static_cast<int64_t>(vocab.find(text[(t + 1) % T]));
    for (int64_t v = 0; v < V; ++v) {
      in.push_back(v == a);
      target.push_back(v == b);
    }
  }
  const Tensor xs = nx::create(nx::float32, {T, 1, V}, in);
  const Tensor targets = nx::create(nx::float32, {T, 1, V}, target);

  auto [k1, rest] = nx::split(nx::key(7));
  auto [k2, k3] = nx::split(rest);
  Rnn model{nx::randn(k1, nx::float32, {V, H}) * 0.3, nx::randn(k2, nx::float32, {H, H}) * 0.1,
            nx::zeros(nx::float32, {H}), nx::randn(k3, nx::float32, {H, V}) * 0.3,
            nx::zeros(nx::float32, {V})};

  // The mean cross-entropy of the next-character predictions over the text: one scan whose
  // carry is the hidden state and whose per-step output is that step's loss.
  int traced = 0;
  auto loss_fn = [&](const Rnn& m) {
    auto step = [&](const Tensor& h, const std::pair<Tensor, Tensor>& xy) {
      ++traced;
      auto [next, logits] = cell(m, h, xy.first);
      return std::make_pair(next, -nx::sum(xy.second * nx::log_softmax(logits, 1)));
    };
    auto [h, losses] =
        rune::scan(step, nx::zeros(nx::float32, {1, H}), std::make_pair(xs, targets));
    return nx::mean(losses);
  };
  auto train_step = rune::jit([&](const Rnn& m) {
    auto [loss, g] = rune::value_and_grad(loss_fn, m);
    const double lr = 0.5;
    return std::make_pair(loss, Rnn{m.w_xh - g.w_xh * lr, m.w_hh - g.w_hh * lr, m.b_h - g.b_h * lr,
                                    m.w_hy - g.w_hy * lr, m.b_y - g.b_y * lr});
  });

  const size_t loops_before = rune::loop_step_iterations();
  for (int i = 0; i <= 300; ++i) {
    auto [loss, next] = train_step(model);
    if (i % 100 == 0) std::printf("step %3d: loss %.4f\n", i, nx::item<float>(loss));
    model = next;
  }
  std::printf(
      "the step body was traced %d time(s); %zu compiled program(s); %zu loop iterations "
      "per call (the scan forward and its reverse)\n",
      traced, train_step.traces(), (rune::loop_step_iterations() - loops_before) / 301);

  // Greedy decoding of one pass over the text from its first character: a scan whose carry is
  // (hidden state, current character) and whose per-step output is the index of the character it
  // predicts next (the xs only set the number of steps).
  auto decode = rune::jit([&](const Rnn& m, const Tensor& first) {
    auto step = [&](const std::pair<Tensor, Tensor>& c, const Tensor&) {
      auto [next, logits] = cell(m, c.first, c.second);
      Tensor pick = nx::argmax(logits, 1);
      return std::make_pair(std::make_pair(next, nx::one_hot(pick, V)), pick);
    };
    auto init = std::make_pair(nx::zeros(nx::float32, {1, H}), first);
    return rune::scan(step, init, nx::zeros(nx::float32, {T - 1})).second;
  });
  Tensor picks = decode(model, nx::index(xs, 0, 0));
  std::string out(1, text[0]);
  for (int64_t p : nx::to_vector<int64_t>(nx::reshape(picks, {T - 1})))
    out += vocab[static_cast<size_t>(p)];
  std::printf("greedy decoding from '%c': \"%s\"\n", text[0], out.c_str());
}
