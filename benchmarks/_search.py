"""An offline search tool over a task's own paragraphs (HotpotQA's context), for adapters to expose.

`search(paragraphs, query, k)` ranks paragraphs with Okapi BM25 (k1=1.5, b=0.75) over lower-cased
word tokens of title + text, stop words included (the corpus is ten paragraphs, so IDF already
discounts them). Ties keep the paragraphs' original order. Pure: no index files, no network.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Iterable

from pydantic import BaseModel

_WORD = re.compile(r"\w+")


class Paragraph(BaseModel):
    title: str
    sentences: list[str]

    @property
    def text(self) -> str:
        return " ".join(s.strip() for s in self.sentences)


class Hit(BaseModel):
    title: str
    text: str
    score: float
    rank: int


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def search(paragraphs: Iterable[Paragraph | dict[str, Any]], query: str, k: int = 3) -> list[Hit]:
    """The `k` paragraphs that best match `query` (BM25). Paragraphs with score 0 are not returned."""
    paras = [p if isinstance(p, Paragraph) else Paragraph.model_validate(p) for p in paragraphs]
    docs = [_tokens(p.title + " " + p.text) for p in paras]
    if not docs or k <= 0:
        return []
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n or 1.0
    df = Counter(t for d in docs for t in set(d))
    q = _tokens(query)
    scored = []
    for i, doc in enumerate(docs):
        tf = Counter(doc)
        score = 0.0
        for term in q:
            if term not in tf:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            freq = tf[term]
            score += idf * freq * 2.5 / (freq + 1.5 * (1 - 0.75 + 0.75 * len(doc) / avgdl))
        if score > 0:
            scored.append((score, i))
    scored.sort(key=lambda si: (-si[0], si[1]))
    return [
        Hit(title=paras[i].title, text=paras[i].text, score=round(s, 6), rank=r)
        for r, (s, i) in enumerate(scored[:k])
    ]


def task_search(task: Any, query: str, k: int = 3) -> list[Hit]:
    """`search` over `task.metadata["paragraphs"]` (what the HotpotQA loader stores)."""
    return search(task.metadata.get("paragraphs", []), query, k)
