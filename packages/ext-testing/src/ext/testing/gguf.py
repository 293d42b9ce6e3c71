"""A tiny random-weight llama GGUF for fast, offline tests of llama.cpp-based clients.

:func:`write_tiny_llama_gguf` writes a real GGUF file (about 200 KB) that llama.cpp loads and generates from:
the llama architecture with 2 small layers and random float32 weights, a byte-level BPE vocabulary where
every byte is one token (so a text's token count is its UTF-8 length), the ChatML special tokens and a ChatML
``tokenizer.chat_template``. Its answers are noise unless a grammar forces them (see
:func:`ext.testing.inprocess.reply_grammar`), which is how the conformance suite scripts it.

Needs the ``gguf`` and ``numpy`` packages (``pip install gguf numpy``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["CHATML_TEMPLATE", "TINY_SPECIAL_TOKENS", "write_tiny_llama_gguf"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""The chat template written into the tiny GGUF."""

TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Special tokens after the 256 byte tokens and the one merge: BOS, the ChatML start and end (EOS)."""


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's reversible byte -> printable character table (what byte-level BPE vocabularies store).
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars), strict=True))


def write_tiny_llama_gguf(
    path: str | os.PathLike[str],
    *,
    n_embd: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    n_ff: int = 128,
    context_length: int = 4096,
    seed: int = 0,
) -> Path:
    """Write the tiny model to ``path`` (overwritten) and return the path. Deterministic for a given ``seed``."""
    try:
        import gguf
        import numpy as np
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "write_tiny_llama_gguf needs the gguf and numpy packages: pip install gguf numpy "
            "(or, from a clone, pip install -e 'packages/ext-testing[gguf]')"
        ) from exc

    out = Path(path)
    table = _bytes_to_unicode()
    tokens = [table[b] for b in range(256)]
    # llama.cpp's BPE loader requires a merges list; one merge of two control bytes leaves all text 1 byte/token.
    merge = f"{table[1]} {table[2]}"
    tokens.append(table[1] + table[2])
    types = [gguf.TokenType.NORMAL] * len(tokens)
    bos_id = len(tokens)
    tokens.extend(TINY_SPECIAL_TOKENS)
    types.extend([gguf.TokenType.CONTROL] * len(TINY_SPECIAL_TOKENS))
    eos_id = bos_id + 2
    n_vocab = len(tokens)

    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("ext-testing tiny random llama")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_heads)
    writer.add_head_count_kv(n_heads)
    writer.add_rope_dimension_count(n_embd // n_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([merge])
    writer.add_bos_token_id(bos_id)
    writer.add_eos_token_id(eos_id)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    writer.add_tensor("token_embd.weight", weights(n_vocab, n_embd))
    for i in range(n_layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weights(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weights(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weights(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weights(n_embd, n_ff))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", weights(n_vocab, n_embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
