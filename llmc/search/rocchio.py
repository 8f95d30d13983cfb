"""Rocchio query expansion for BM25 from HyDE hypotheses: pure functions, no I/O.

The hypotheses stand in for relevant documents. With ``c(t)`` the centroid of their
length-normalised term frequencies (mean over hypotheses of ``tf_h(t) / |h|``) and
``nf(t) = c(t) / max c`` its normalised form, the expanded query weighs

- an original query term ``q``:  ``(alpha + beta * nf(q)) / alpha``  (at least 1),
- an expansion term ``t``:       ``beta * nf(t) / alpha``            (at most beta / alpha),

which is Rocchio's ``alpha * q + beta * centroid`` divided by ``alpha``, so the original
terms keep weight 1 in the BM25 query (BM25 ranks are unchanged by a common factor) and
are weighted up where the hypotheses repeat them (stopwords and filler never are: the
centroid counts only terms ``keep_term`` accepts). Expansion terms are the ``max_terms``
best by ``nf`` among terms that are no query term, occur in the corpus, and occur in less
than ``max_df`` of its spans (frequent words only add noise), not stopwords or numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from llmc.errors import ConfigError
from llmc.search.query import STOPWORDS

# Words every hypothesis is full of that say nothing about the topic: code keywords and
# the filler a small LLM writes around its answer. Corpus frequency drops most of them
# anyway; this list keeps a tiny corpus from taking them as rare.
NOISE_WORDS = frozenset(
    """self cls def return none true false null import from class pass elif else while
    try except raise finally lambda yield async await const let var function new this
    public private static void int str bool dict list float args kwargs param params
    here example following code below above using used use also value values"""
    .split()
)  # fmt: skip


def keep_term(term: str) -> bool:
    """Whether an analysed term may be an expansion term at all."""
    return (
        len(term) >= 3
        and not term.isdigit()
        and term not in STOPWORDS
        and term not in NOISE_WORDS
        and any(ch.isalpha() for ch in term)
    )


def centroid(docs: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean over ``docs`` of each term's frequency in a doc divided by the doc's length.

    An empty doc counts in the mean (it adds nothing); no docs gives ``{}``."""
    if not docs:
        return {}
    out: dict[str, float] = {}
    for doc in docs:
        if not doc:
            continue
        counts = Counter(doc)
        for term, tf in counts.items():
            out[term] = out.get(term, 0.0) + tf / len(doc)
    return {t: v / len(docs) for t, v in out.items()}


def expand(
    query_terms: Iterable[str],
    docs: Sequence[Sequence[str]],
    doc_freq: Mapping[str, int],
    n_docs: int,
    alpha: float = 1.0,
    beta: float = 0.5,
    max_terms: int = 10,
    max_df: float = 0.1,
) -> dict[str, float]:
    """Rocchio weights ``{term: weight}`` (see the module docstring).

    ``query_terms`` and ``docs`` are analysed terms (lowercased, stemmed) of the query and
    of each hypothesis; ``doc_freq`` holds the corpus document frequency of every
    candidate term (missing: 0); ``n_docs`` the number of spans. Query terms absent from
    the hypotheses keep weight 1. Ties between expansion terms go to the term that sorts
    first, so the result is deterministic."""
    if alpha <= 0:
        raise ConfigError(f"hyde.rocchio_alpha must be > 0, got {alpha}")
    if beta < 0:
        raise ConfigError(f"hyde.rocchio_beta must be >= 0, got {beta}")
    query = list(dict.fromkeys(query_terms))
    cent = centroid([[t for t in doc if keep_term(t)] for doc in docs])
    top = max(cent.values(), default=0.0)
    nf = {t: v / top for t, v in cent.items()} if top > 0 else {}
    weights = {q: (alpha + beta * nf.get(q, 0.0)) / alpha for q in query}
    if beta == 0 or max_terms <= 0 or n_docs <= 0:
        return weights
    candidates = [
        t
        for t in nf
        if t not in weights and keep_term(t) and 0 < doc_freq.get(t, 0) < max_df * n_docs
    ]
    candidates.sort(key=lambda t: (-nf[t], t))
    for t in candidates[:max_terms]:
        weights[t] = beta * nf[t] / alpha
    return weights


__all__ = ["NOISE_WORDS", "centroid", "expand", "keep_term"]
