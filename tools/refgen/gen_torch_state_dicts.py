#!/usr/bin/env python3
"""PyTorch state_dicts for rune::nn's checkpoint interop (nn/torch_interop.h, docs/nn.md).

Writes, under tests/data/torch/ (read by tests/nn/test_torch_interop.cpp; the tests need no
Python):
  mlp.safetensors    nn.Sequential(Linear(8, 16), ReLU, Linear(16, 4)).state_dict()
  cnn.safetensors    nn.Sequential(Conv2d(3, 6, 3, padding=1), BatchNorm2d(6), ReLU,
                     Conv2d(6, 8, 3, stride=2, padding=1, bias=False), MaxPool2d(2), Flatten,
                     Linear(32, 5)).state_dict(), after ten training-mode forwards (running
                     statistics and num_batches_tracked = 10 are not the defaults)
  embed.safetensors  EmbedNet (emb: Embedding(20, 12), ln: LayerNorm(12), head: Linear(12, 7))
  mha.safetensors    nn.MultiheadAttention(16, 4, batch_first=True).state_dict() (in_proj_weight
                     [48, 16], in_proj_bias, out_proj.weight / .bias; biases drawn at random)
  mha_io.safetensors its calls with need_weights=False: self-attention (self.x [2, 5, 16], a
                     key_padding_mask self.kpm [2, 5] and a causal bool attn_mask self.causal
                     [5, 5], True masking, torch's convention) -> self.y / self.y64; and
                     cross-attention batch second (the same weights with batch_first=False:
                     cross.q [3, 2, 16], cross.k and cross.v [6, 2, 16], a float attn_mask
                     cross.mask [8, 3, 6] per batch and head) -> cross.y / cross.y64
  io.safetensors     each model's fixed input (<model>.x) and its output in evaluation mode in
                     float32 (<model>.y, torch's CPU kernels) and in float64 (<model>.y64, the
                     same float32 weights and input run by model.double())
Each file is written by safetensors.torch.save_file(model.state_dict(), ...), torch's own names
and layouts (Linear weight [out, in], Conv2d weight [out, in, kh, kw]). Norm weights and biases
are drawn at random so that none is a default.

    /work/main/bench/.venv/bin/python tools/refgen/gen_torch_state_dicts.py

Check mode (optional, not run by ctest): torch loads the files rune saved. Run the C++ test
with RUNE_TORCH_INTEROP_SAVE_DIR=<dir> (it writes <dir>/<model>.safetensors with
rune::nn::save_torch_state_dict):

    RUNE_TORCH_INTEROP_SAVE_DIR=<dir> build/tests/nn/test_torch_interop \
        --gtest_filter='*RoundTrip*/CPU'

then

    python tools/refgen/gen_torch_state_dicts.py --check <dir>

which loads each into a fresh torch model with load_state_dict(strict=True) and compares its
float32 output to io.safetensors' (bit for bit: rune saved the weights it loaded).
"""
import argparse
import copy
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from torch import nn


class EmbedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 12)
        self.ln = nn.LayerNorm(12)
        self.head = nn.Linear(12, 7)

    def forward(self, ids):
        return self.head(self.ln(self.emb(ids)))


def make_models():
    torch.manual_seed(41)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    cnn = nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1),
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.Conv2d(6, 8, 3, stride=2, padding=1, bias=False),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32, 5),
    )
    embed = EmbedNet()
    with torch.no_grad():
        cnn[1].weight.uniform_(0.5, 1.5)
        cnn[1].bias.uniform_(-0.5, 0.5)
        embed.ln.weight.uniform_(0.5, 1.5)
        embed.ln.bias.uniform_(-0.5, 0.5)
        # Running statistics away from (0, 1): training-mode forwards on shifted batches.
        cnn.train()
        for _ in range(10):
            cnn(torch.randn(4, 3, 8, 8) * 3.0 + 1.5)
    inputs = {
        "mlp": torch.randn(5, 8),
        "cnn": torch.randn(4, 3, 8, 8),
        "embed": torch.randint(0, 20, (3, 5), dtype=torch.int64),
    }
    models = {"mlp": mlp, "cnn": cnn, "embed": embed}
    for m in models.values():
        m.eval()
    return models, inputs


def generate_mha(out):
    """nn.MultiheadAttention's weights and two calls (self- and cross-attention)."""
    torch.manual_seed(4141)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.uniform_(-0.5, 0.5)
        mha.out_proj.bias.uniform_(-0.5, 0.5)
    mha.eval()
    x = torch.randn(2, 5, 16)
    kpm = torch.zeros(2, 5, dtype=torch.bool)
    kpm[1, 3:] = True  # the second sequence has 3 tokens
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    q, k, v = torch.randn(3, 2, 16), torch.randn(6, 2, 16), torch.randn(6, 2, 16)
    mask = torch.randn(8, 3, 6)
    second = nn.MultiheadAttention(16, 4, batch_first=False)
    second.load_state_dict(mha.state_dict())
    second.eval()
    io = {"self.x": x, "self.kpm": kpm, "self.causal": causal, "cross.q": q, "cross.k": k,
          "cross.v": v, "cross.mask": mask}
    with torch.no_grad():
        for dtype, suffix in ((torch.float32, ""), (torch.float64, "64")):
            a = copy.deepcopy(mha).to(dtype)
            b = copy.deepcopy(second).to(dtype)
            io["self.y" + suffix] = a(x.to(dtype), x.to(dtype), x.to(dtype), key_padding_mask=kpm,
                                      attn_mask=causal, need_weights=False)[0]
            io["cross.y" + suffix] = b(q.to(dtype), k.to(dtype), v.to(dtype),
                                       attn_mask=mask.to(dtype), need_weights=False)[0]
    save_file({k: t.contiguous() for k, t in mha.state_dict().items()},
              os.path.join(out, "mha.safetensors"))
    save_file({k: t.contiguous() for k, t in io.items()}, os.path.join(out, "mha_io.safetensors"),
              metadata={"generator": "tools/refgen/gen_torch_state_dicts.py",
                        "torch": torch.__version__})
    print("mha    %s; keys %s" % (list(x.shape), list(mha.state_dict())), file=sys.stderr)


def fresh_models():
    """Models of the same structure with other weights (what --check loads into)."""
    torch.manual_seed(7)
    return {
        "mlp": nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
        "cnn": nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1),
            nn.BatchNorm2d(6),
            nn.ReLU(),
            nn.Conv2d(6, 8, 3, stride=2, padding=1, bias=False),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32, 5),
        ),
        "embed": EmbedNet(),
    }


def generate(out):
    os.makedirs(out, exist_ok=True)
    models, inputs = make_models()
    io = {}
    for name, m in models.items():
        sd = {k: v.contiguous() for k, v in m.state_dict().items()}
        save_file(sd, os.path.join(out, name + ".safetensors"))
        x = inputs[name]
        with torch.no_grad():
            y = m(x)
            m64 = copy.deepcopy(m).double().eval()
            y64 = m64(x.double() if x.is_floating_point() else x)
        io[name + ".x"] = x.contiguous()
        io[name + ".y"] = y.contiguous()
        io[name + ".y64"] = y64.contiguous()
        print("%-6s %s -> %s; keys %s" % (name, list(x.shape), list(y.shape), list(sd)),
              file=sys.stderr)
    save_file(io, os.path.join(out, "io.safetensors"),
              metadata={"generator": "tools/refgen/gen_torch_state_dicts.py",
                        "torch": torch.__version__})
    generate_mha(out)


def check(data, saved):
    io = load_file(os.path.join(data, "io.safetensors"))
    ok = True
    for name, m in fresh_models().items():
        path = os.path.join(saved, name + ".safetensors")
        if not os.path.exists(path):
            print("%s: missing (run the C++ test with RUNE_TORCH_INTEROP_SAVE_DIR)" % path)
            ok = False
            continue
        sd = load_file(path)
        m.load_state_dict(sd, strict=True)  # raises on a missing or unexpected key or a shape
        m.eval()
        with torch.no_grad():
            y = m(io[name + ".x"])
        same = torch.equal(y, io[name + ".y"])
        ok = ok and same
        print("%-6s torch loaded %d tensors (strict); output %s" %
              (name, len(sd), "bit-identical" if same else
               "differs by %g" % (y - io[name + ".y"]).abs().max().item()))
    return ok


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    data = os.path.normpath(os.path.join(root, "tests", "data", "torch"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", metavar="DIR", help="load rune's saved files from DIR into torch")
    a = p.parse_args()
    if a.check:
        sys.exit(0 if check(data, a.check) else 1)
    generate(data)


if __name__ == "__main__":
    main()
