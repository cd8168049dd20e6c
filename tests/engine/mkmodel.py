#!/usr/bin/env python3
"""tests/engine/mkmodel.py OUT.gguf - a tiny llama model with random weights.

No model can be downloaded here, and none is needed: what the engine tests
measure is routing and the engine's prefix cache, whose timing and
bookkeeping are real whatever the weights. The text generated is noise.

The file is GGUF v3 written with the standard library alone:
- llama architecture, n_embd 256, 2 layers, 4 heads, ff 768, f16 matrices,
  context 65536 (the launcher chooses the context it allocates);
- a byte-level gpt2 vocabulary: the 256 byte tokens, <|endoftext|> (id 256)
  and one merge that never occurs (two NUL bytes), so that one byte of text
  is exactly one token and prompt lengths are known in tokens;
- the output rows of every token but printable ASCII are zero: the reply
  stays printable and EOS is never likely, so generation runs to max_tokens;
- a ChatML chat template (what llama-server falls back to anyway).

The weights come from a seeded generator: the same arguments write the same
bytes. Options: --layers N (more layers = a slower server), --embd N.
"""

import argparse
import array
import random
import struct
import sys

ALIGN = 32

# GGUF value types (gguf.md in ggml's repository)
T_UINT32, T_INT32, T_FLOAT32, T_STRING, T_ARRAY = 4, 5, 6, 8, 9
# ggml tensor types
G_F32, G_F16 = 0, 1

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def byte_tokens():
    """GPT-2's byte -> printable unicode map, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    out = {}
    n = 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == T_UINT32:
        out += struct.pack("<I", value)
    elif vtype == T_FLOAT32:
        out += struct.pack("<f", value)
    elif vtype == T_STRING:
        out += gstr(value)
    else:
        raise ValueError(vtype)
    return out


def kv_array(key, etype, values):
    out = gstr(key) + struct.pack("<IIQ", T_ARRAY, etype, len(values))
    if etype == T_STRING:
        out += b"".join(gstr(v) for v in values)
    elif etype == T_INT32:
        out += struct.pack(f"<{len(values)}i", *values)
    else:
        raise ValueError(etype)
    return out


def f16_random(rng, n, scale):
    """n f16 values uniform in [-scale, scale], as bytes."""
    return struct.pack(f"<{n}e", *(rng.uniform(-scale, scale) for _ in range(n)))


def build(layers, embd, heads, ff, ctx, seed):
    rng = random.Random(seed)
    tokens = byte_tokens() + ["<|endoftext|>"]
    n_vocab = len(tokens)
    eos = n_vocab - 1
    types = [1] * 256 + [3]  # normal, control
    meta = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, "warmlane-tiny-random"),
        kv("general.alignment", T_UINT32, ALIGN),
        kv("llama.context_length", T_UINT32, ctx),
        kv("llama.embedding_length", T_UINT32, embd),
        kv("llama.block_count", T_UINT32, layers),
        kv("llama.feed_forward_length", T_UINT32, ff),
        kv("llama.attention.head_count", T_UINT32, heads),
        kv("llama.attention.head_count_kv", T_UINT32, heads),
        kv("llama.rope.dimension_count", T_UINT32, embd // heads),
        kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5),
        kv("llama.vocab_size", T_UINT32, n_vocab),
        kv("tokenizer.ggml.model", T_STRING, "gpt2"),
        kv("tokenizer.ggml.pre", T_STRING, "default"),
        kv_array("tokenizer.ggml.tokens", T_STRING, tokens),
        kv_array("tokenizer.ggml.token_type", T_INT32, types),
        # one merge of two NUL bytes: never occurs in text
        kv_array("tokenizer.ggml.merges", T_STRING, [tokens[0] + " " + tokens[0]]),
        kv("tokenizer.ggml.bos_token_id", T_UINT32, eos),
        kv("tokenizer.ggml.eos_token_id", T_UINT32, eos),
        kv("tokenizer.chat_template", T_STRING, CHATML),
    ]

    tensors = []  # (name, dims (ne0 first), ggml type, data)

    def mat(name, ne0, ne1, scale=None):
        s = scale if scale is not None else 1.0 / (ne0 ** 0.5)
        tensors.append((name, (ne0, ne1), G_F16, f16_random(rng, ne0 * ne1, s)))

    def norm(name, n):
        tensors.append((name, (n,), G_F32, array.array("f", [1.0] * n).tobytes()))

    mat("token_embd.weight", embd, n_vocab, 1.0)
    norm("output_norm.weight", embd)
    # output: printable ASCII rows random, every other row (control bytes,
    # non-ASCII bytes, EOS) zero
    rows = []
    for t in range(n_vocab):
        if 0x20 <= t <= 0x7E:
            rows.append(f16_random(rng, embd, 1.0 / (embd ** 0.5)))
        else:
            rows.append(bytes(2 * embd))
    tensors.append(("output.weight", (embd, n_vocab), G_F16, b"".join(rows)))
    for i in range(layers):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", embd)
        mat(p + "attn_q.weight", embd, embd)
        mat(p + "attn_k.weight", embd, embd)
        mat(p + "attn_v.weight", embd, embd)
        mat(p + "attn_output.weight", embd, embd)
        norm(p + "ffn_norm.weight", embd)
        mat(p + "ffn_gate.weight", embd, ff)
        mat(p + "ffn_up.weight", embd, ff)
        mat(p + "ffn_down.weight", ff, embd)

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta)
    infos = b""
    offset = 0
    offsets = []
    for name, dims, gtype, data in tensors:
        offsets.append(offset)
        infos += gstr(name) + struct.pack("<I", len(dims)) + \
            struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", gtype, offset)
        offset += len(data)
        offset += (-offset) % ALIGN
    out = bytearray(head + infos)
    out += bytes((-len(out)) % ALIGN)
    for (name, dims, gtype, data), off in zip(tensors, offsets):
        out += data
        out += bytes((-len(out)) % ALIGN)
    return bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=768)
    ap.add_argument("--ctx", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.embd % a.heads or a.layers < 1:
        print("mkmodel: --embd must be a multiple of --heads, --layers >= 1",
              file=sys.stderr)
        return 2
    data = build(a.layers, a.embd, a.heads, a.ff, a.ctx, a.seed)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    import os
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
