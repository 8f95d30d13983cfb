"""Does anything in the index match the query? The "no good match" line.

Result scores are ranks in disguise (a fused or learned score orders one query's results
and means nothing across queries), so gibberish and a question no repository answers
come back looking like real hits. Two signals say whether the index holds anything the
query is about, both read from what the query already computed:

- ``term_share``: the share of the query's content words (stopwords left out) that some
  indexed span holds (the lexical index's document frequencies; 0 for gibberish);
- ``dense_best``: the best cosine similarity of the dense retrievers' lists (the
  embedder's one scale; near 0.1-0.2 for a question about something else).

The query is a **weak match** when no content word is in the index and nothing is close
in meaning, or when few words are and nothing is close. The thresholds were chosen on
the validation projects' real queries (none flagged may be wrong; a real question rarely
is) against gibberish and everyday questions: ``lab/tools/match_signal.py``,
docs/reports/2026-11-29-lookup-message-match.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmc.search.query import STOPWORDS
from llmc.search.types import DENSE, Match, RankedList
from llmc.store.tokens import code_tokens

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search.sources import Sources

# Weak: no content word indexed and the closest span's cosine below NONE_COSINE, or fewer
# than FEW_SHARE of the words indexed and the cosine below FEW_COSINE.
NONE_COSINE = 0.45
FEW_SHARE = 0.75
FEW_COSINE = 0.22


def judge(sources: Sources, text: str, lists: Sequence[RankedList]) -> Match | None:
    """The match of ``text`` against the index, from its retrieved ``lists``; None when
    the lexical index is missing (nothing to count words in)."""
    if sources.lexical is None:
        return None
    words = [
        w for w in dict.fromkeys(t.lower() for t in code_tokens(text))
        if w not in STOPWORDS and len(w) > 2 and not w.isdigit()
    ]  # fmt: skip
    terms = sources.lexical.query_terms(" ".join(words)) if words else []
    if terms:
        df = sources.lexical.document_frequencies(terms)
        share = sum(1 for t in terms if df.get(t, 0) > 0) / len(terms)
    else:
        share = 1.0  # nothing to look up: no verdict from words
    dense = [r.hits[0].score for r in lists if r.retriever == DENSE and r.hits]
    best = max(dense) if dense else None
    return Match(share, len(terms), best, _weak(share, best))


def _weak(share: float, best: float | None) -> bool:
    if best is None:
        return share == 0
    if share == 0:
        return best < NONE_COSINE
    return share < FEW_SHARE and best < FEW_COSINE


__all__ = ["FEW_COSINE", "FEW_SHARE", "NONE_COSINE", "Match", "judge"]
