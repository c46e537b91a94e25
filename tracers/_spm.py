"""A SentencePiece (BPE) tokenizer read from a GGUF file: the local model's own token ids for a text.

The confidence method forces a step's text as the local model's completion and reads the probability
the model gave each token. Forced as a string, llama.cpp's grammar lets greedy decoding pick ANY token
path that spells the text, and it degenerates (a lone space, then letter by letter, each piece
improbable). Forced as the tokenizer's own ids (a token-level grammar, `<[id]>`), the path is the one
the model would have produced. llama.cpp's binding exposes no tokenizer, so this module reads the
vocabulary (`tokenizer.ggml.tokens`, `.scores`, `.token_type`) from the GGUF and encodes as llama.cpp's
SPM tokenizer does: spaces become `▁`, characters are merged pairwise by the highest vocabulary score
(ties: leftmost), pieces not in the vocabulary fall back to byte tokens `<0xXX>`. Special and
user-defined tokens written inside the text are not recognised (they are encoded as plain text).
"""

from __future__ import annotations

import heapq
from functools import lru_cache

from rootstep.gateway import GGUFError, gguf_metadata

_WANTED = {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
           "tokenizer.ggml.add_space_prefix"}
SPACE = "\u2581"


def read_vocabulary(path: str) -> dict[str, object]:
    """The tokenizer entries of a GGUF file's metadata."""
    found = gguf_metadata(path, _WANTED)
    if found.get("tokenizer.ggml.model") != "llama" or "tokenizer.ggml.tokens" not in found:
        raise GGUFError(f"{path}: tokenizer.ggml.model: {found.get('tokenizer.ggml.model')!r} is not a SentencePiece vocabulary")
    return found


class SentencePiece:
    """Encode text into the token ids of a GGUF SentencePiece vocabulary (see the module docstring)."""

    def __init__(self, tokens: list[str], scores: list[float], add_space_prefix: bool = False):
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.scores = scores
        self.add_space_prefix = add_space_prefix

    @classmethod
    def from_gguf(cls, path: str) -> "SentencePiece":
        v = read_vocabulary(path)
        tokens = v["tokenizer.ggml.tokens"]
        scores = v.get("tokenizer.ggml.scores") or [0.0] * len(tokens)  # type: ignore[arg-type]
        return cls(tokens, scores, bool(v.get("tokenizer.ggml.add_space_prefix", False)))  # type: ignore[arg-type]

    def encode(self, text: str) -> list[int]:
        text = text.replace(" ", SPACE)
        if self.add_space_prefix:
            text = SPACE + text
        symbols = list(text)
        alive = [True] * len(symbols)
        prev = list(range(-1, len(symbols) - 1))
        nxt = list(range(1, len(symbols) + 1))
        heap: list[tuple[float, int, int, str]] = []

        def push(left: int, right: int) -> None:
            if left < 0 or right >= len(symbols):
                return
            merged = symbols[left] + symbols[right]
            token = self.ids.get(merged)
            if token is not None:
                heapq.heappush(heap, (-self.scores[token], left, right, merged))

        for i in range(1, len(symbols)):
            push(i - 1, i)
        while heap:
            _, left, right, merged = heapq.heappop(heap)
            if not (alive[left] and alive[right]) or nxt[left] != right or symbols[left] + symbols[right] != merged:
                continue  # stale: one side was merged since
            symbols[left] = merged
            alive[right] = False
            nxt[left] = nxt[right]
            if nxt[right] < len(symbols):
                prev[nxt[right]] = left
            push(prev[left], left)
            push(left, nxt[left])
        out: list[int] = []
        for i, symbol in enumerate(symbols):
            if not alive[i]:
                continue
            token = self.ids.get(symbol)
            if token is not None:
                out.append(token)
            else:  # byte fallback
                out += [self.ids[f"<0x{b:02X}>"] for b in symbol.encode("utf-8") if f"<0x{b:02X}>" in self.ids]
        return out


@lru_cache(maxsize=2)
def vocabulary(path: str) -> SentencePiece:
    """The tokenizer of the GGUF at `path`, read once per process."""
    return SentencePiece.from_gguf(path)
