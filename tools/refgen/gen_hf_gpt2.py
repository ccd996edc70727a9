#!/usr/bin/env python3
"""A small random Hugging Face GPT-2 checkpoint and transformers' outputs for rune::nn's GPT-2
(nn/gpt2.h, nn/hf_gpt2.h, docs/nn.md "Hugging Face GPT-2").

Writes, under tests/data/hf_gpt2/ (read by tests/nn/test_hf_gpt2.cpp; the test needs no Python):
  model.safetensors, config.json, generation_config.json
      GPT2LMHeadModel(GPT2Config(vocab_size=97, n_positions=64, n_embd=32, n_layer=2,
      n_head=4, initializer_range=0.5)).save_pretrained(...), as transformers writes it: names
      "transformer.h.0.attn.c_attn.weight", ..., Conv1D weights [in, out], lm_head.weight left
      out (tied to transformer.wte.weight). torch.manual_seed(43); LayerNorm weights drawn from
      U(0.5, 1.5) and every bias from U(-0.2, 0.2), so that none is a default. The large
      initializer_range (0.02 is GPT-2's) spreads the logits (max |logit| about 11), so the greedy
      continuation moves between tokens instead of repeating one and each step's top two logits
      are far apart (the smallest gap is printed; about 0.13).
  reference.safetensors
      prompt [2, 6] and prompt1 [1, 9] (int64 token ids);
      logits, logits1: the model's float32 logits of each prompt (transformers' eager attention,
      torch's CPU kernels), [B, T, 97];
      logits64, logits1_64: the same float32 weights run in float64 (model.double());
      greedy, greedy1: each prompt followed by its greedy continuation of 20 tokens,
      model.generate(do_sample=False, max_new_tokens=20), [B, T + 20] int64.
The script checks that the continuation of generate (which uses its key-value cache) equals a
full-recompute argmax loop in float32 and in float64, so the tokens do not hang on rounding.

    bench/.venv/bin/python -m pip install transformers    # once (torch and safetensors are there)
    bench/.venv/bin/python tools/refgen/gen_hf_gpt2.py

Check mode (optional, not run by ctest): transformers loads the checkpoint rune saved
(rune::nn::save_hf_gpt2, written by the C++ test with RUNE_HF_GPT2_SAVE_DIR=<dir>):

    RUNE_HF_GPT2_SAVE_DIR=<dir> build/tests/nn/test_hf_gpt2 --gtest_filter='*SaveLoad*'
    bench/.venv/bin/python tools/refgen/gen_hf_gpt2.py --check <dir>

GPT2LMHeadModel.from_pretrained(<dir>) must report no missing, unexpected or mismatched keys,
and its logits and greedy continuations must equal reference.safetensors' bit for bit (rune saved
the weights it loaded).
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

NEW_TOKENS = 20
PROMPT = [[5, 17, 42, 3, 88, 23], [60, 1, 96, 14, 14, 7]]
PROMPT1 = [[11, 0, 96, 50, 2, 2, 73, 31, 64]]


def make_model():
    torch.manual_seed(43)
    config = GPT2Config(
        vocab_size=97,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        initializer_range=0.5,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.split(".")[-2] in ("ln_1", "ln_2", "ln_f") and name.endswith(".weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith(".bias"):
                p.uniform_(-0.2, 0.2)
    return model.eval()


def argmax_loop(model, ids, n):
    """Greedy by full recomputation: each step runs the whole sequence and appends the argmax."""
    with torch.no_grad():
        for _ in range(n):
            nxt = model(ids).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    return ids


def smallest_gap(model, seq, prompt_len):
    """The smallest difference of the top two logits over the steps that chose a new token."""
    with torch.no_grad():
        lg = model(seq[:, :-1]).logits[:, prompt_len - 1:]
    top = lg.topk(2, -1).values
    return (top[..., 0] - top[..., 1]).min().item()


def check(data, saved):
    ref = load_file(os.path.join(data, "reference.safetensors"))
    model, info = GPT2LMHeadModel.from_pretrained(saved, output_loading_info=True,
                                                  attn_implementation="eager")
    model.eval()
    problems = {k: v for k, v in info.items() if v}
    ok = not problems
    print("from_pretrained(%s): %s" % (saved, problems or "no missing, unexpected or mismatched "
                                       "keys"))
    for suffix in ("", "1"):
        ids = ref["prompt" + suffix]
        with torch.no_grad():
            logits = model(ids).logits
            greedy = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                    max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                    pad_token_id=0)
        same = torch.equal(logits, ref["logits" + suffix])
        same_greedy = torch.equal(greedy, ref["greedy" + suffix])
        ok = ok and same and same_greedy
        print("prompt%-2s logits %s, greedy continuation %s" %
              (suffix, "bit-identical" if same else "differ by %g" %
               (logits - ref["logits" + suffix]).abs().max().item(),
               "equal" if same_greedy else "differs"))
    return ok


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    out = os.path.normpath(os.path.join(root, "tests", "data", "hf_gpt2"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", metavar="DIR", help="load rune's saved checkpoint from DIR")
    a = p.parse_args()
    if a.check:
        sys.exit(0 if check(out, a.check) else 1)
    os.makedirs(out, exist_ok=True)
    model = make_model()
    model.save_pretrained(out)
    model64 = make_model().double().eval()  # the same draws, run in float64
    ref = {}
    for suffix, prompt in (("", PROMPT), ("1", PROMPT1)):
        ids = torch.tensor(prompt, dtype=torch.int64)
        with torch.no_grad():
            logits = model(ids).logits
            logits64 = model64(ids).logits
            # An explicit attention mask: without one generate masks the prompt's pad_token_id.
            greedy = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                    max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                    pad_token_id=0)
        for other, what in ((argmax_loop(model, ids, NEW_TOKENS), "float32 argmax loop"),
                            (argmax_loop(model64, ids, NEW_TOKENS), "float64 argmax loop")):
            if not torch.equal(greedy, other):
                sys.exit("gen_hf_gpt2: generate's continuation differs from the %s:\n%s\n%s" %
                         (what, greedy.tolist(), other.tolist()))
        ref["prompt" + suffix] = ids
        ref["logits" + suffix] = logits.contiguous()
        ref[("logits%s_64" % suffix) if suffix else "logits64"] = logits64.contiguous()
        ref["greedy" + suffix] = greedy.contiguous()
        print("prompt%-2s %s: max |logit| %.3g, |f32 - f64| <= %.3g, smallest top-2 gap %.3g; "
              "continuation %s" %
              (suffix, list(ids.shape), logits.abs().max().item(),
               (logits.double() - logits64).abs().max().item(),
               smallest_gap(model, greedy, ids.shape[1]), greedy[:, ids.shape[1]:].tolist()),
              file=sys.stderr)
    import transformers
    save_file(ref, os.path.join(out, "reference.safetensors"),
              # One metadata entry: safetensors writes several in a random order.
              metadata={"generator": "tools/refgen/gen_hf_gpt2.py (torch %s, transformers %s)" %
                        (torch.__version__, transformers.__version__)})
    sizes = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out))}
    print("wrote %s: %s" % (out, json.dumps(sizes)), file=sys.stderr)


if __name__ == "__main__":
    main()
