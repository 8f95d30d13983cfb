"""The config's sections: one dataclass per ``[section]`` of ``llmc.toml``, each key with its
type, default and, in the comment on its line, what it does (``tools/gen_config_docs.py``
turns those comments into ``.llmc.example`` and docs/configuration.md). How values are read,
layered and checked is ``llmc/config.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IndexConfig:
    """`llmc index` (llmc.index): which files, how they are cut into spans."""

    include: list[str] = field(default_factory=list)  # gitignore-style globs; empty: all files
    exclude: list[str] = field(default_factory=list)  # gitignore-style globs never indexed
    max_file_size: int = 1_048_576  # bytes; larger files are skipped as too-large
    # Directory names never walked (vendored, generated, caches, VCS, environments).
    skip_dirs: list[str] = field(
        default_factory=lambda: [
            "node_modules",
            ".venv",
            "venv",
            "env",
            ".tox",
            ".nox",
            "dist",
            "build",
            "__pycache__",
            ".mypy_cache",
            ".pytest_cache",
            ".ruff_cache",
            "target",
            "vendor",
            "third_party",
            ".git",
            ".hg",
            ".svn",
            ".llmc",
            ".idea",
            ".vscode",
            "site-packages",
            ".eggs",
            "coverage",
            "htmlcov",
            ".next",
            ".nuxt",
            "bower_components",
        ]
    )
    index_secrets: bool = False  # index .env*, *.pem, *.key, id_rsa*, *.p12, credentials...
    # a file whose text holds a secret (a token, a private key, password = "<generated>")
    # is indexed with the value replaced by [REDACTED] instead of skipped (documentation
    # pages, .md .rst .txt .adoc, are redacted either way: an example must not cost the page)
    redact_secrets: bool = False
    # Skip generated and minified files: lock files, *.min.js, source maps, minified JS/CSS/JSON,
    # Sphinx/Doxygen HTML output, "Code generated ... DO NOT EDIT" / @generated headers.
    skip_generated: bool = True
    skip_translations: bool = True  # skip gettext .po/.pot/.mo and XLIFF translation catalogues
    max_span_lines: int = 120  # longer spans are split into parts, keeping their symbol
    span_overlap_lines: int = 10  # lines shared by consecutive parts of a split span
    window_lines: int = 60  # span size for files without a grammar
    languages: list[str] = field(default_factory=list)  # index only these languages; empty: all
    lock_timeout: float = 300.0  # seconds a second writer waits for the index lock
    # Who embeds a run's new spans once it is searchable (`llmc index --vectors`): here |
    # later (the daemon, else one background process) | none | auto (later at a terminal
    # or with a daemon when at most 2,000 spans miss a vector, else here).
    vectors: str = "auto"


@dataclass
class EmbeddingConfig:
    """Embeddings (llmc.models.embedder): sentence-transformers models, device, precision."""

    # Model for code spans: default (all-MiniLM-L6-v2, shipped offline), code (llmc's code-tuned
    # MiniLM, shipped; docs/embedder.md), a name or a path.
    code_model: str = "default"
    docs_model: str = "default"  # model for doc spans; changing a model re-embeds its table
    device: str = "auto"  # auto (cuda > mps > cpu) | cuda | mps | cpu
    precision: str = (
        "auto"  # auto (fp16 on CUDA, bf16 on CPUs with it, else fp32) | fp32 | bf16 | fp16
    )
    batch_size: int = 0  # spans per forward pass (length-sorted); 0: 32 on a CPU, 256 on a GPU
    max_seq_length: int = 256  # tokens per span; longer text is truncated by the model
    query_prefix: str = ""  # prepended to queries (e.g. "query: " for e5 models)
    passage_prefix: str = ""  # prepended to spans (e.g. "passage: " for e5 models)
    # auto: ONNX Runtime int8 on CPU (checked against torch), torch on CUDA/MPS; on CPUs with
    # AVX512-BF16/AMX torch bf16 for passages (measured faster there) and int8 for queries
    # (a cold search needs no torch) | torch | onnx (CPU)
    runtime: str = "auto"
    base_url: str = ""  # openai:<model> embedders: the OpenAI-compatible server's URL (.../v1)
    api_key_env: str = ""  # openai:<model> embedders: NAME of the variable holding its key


@dataclass
class SearchConfig:
    """`llmc search` (llmc.search). Each stage switch turns its stage off at no cost."""

    k: int = 10
    route: str = "auto"  # auto | code | docs | mixed
    bm25_depth: int = 50
    dense_depth: int = 50
    fusion: str = "rrf"  # rrf | weighted | max
    rrf_k: int = 60
    max_per_file: int = 3  # 0: no per-file diversity cap
    exact_symbol: bool = True
    snippet_lines: int = 12
    bm25: bool = True
    dense: bool = True
    routing: bool = True
    graph: bool = False  # graph-neighbor expansion and graph priors ([expand]); off: no graph read
    rerank: bool = False  # cross-encoder rerank of the top results ([rerank]); off until it wins
    llm_rerank: bool = False  # LLM listwise rerank of the top few, gated ([llm_rerank])
    dense_floor: float = 0.2  # a route "found something" if a dense hit reaches this cosine
    bm25_weight: float = 1.0  # per-list fusion weights, times the router's route weight
    dense_weight: float = 1.0
    exact_weight: float = 0.5  # fusion weight of the `exact` list (plain-word and path lookups)
    exact_max: int = 3  # pin a name's definitions first only when it has at most this many
    route_drop_confidence: float = 0.8  # the router drops a route only at this confidence
    min_route_weight: float = 0.5  # the least weight a disfavoured (not dropped) route keeps
    merge_routes: bool = True  # fuse one list per retriever (code + docs by score), else per route
    test_weight: float = 0.5  # routed: test files' weight unless the query asks about tests
    # what BM25, dense and the ranker read of a query; a longer one is read as a report
    # (title, prose, code, frames, identifiers: llmc/search/report.py), with a warning
    max_query_chars: int = 2000
    blas_threads: int = 1  # BLAS threads during a query (0: leave as is)
    torch_threads: int = 1  # torch threads during a query embedding (0: leave as is)
    hyde: bool = True  # adaptive HyDE for vague queries (settings in [hyde]); false: off, no cost
    ranker: str = "learned"  # learned: the learned ranker | fusion: hand-set weights (RRF) | auto: learned unless docs intent
    ranker_model: str = "default"  # learned: the shipped model (llmc/models/ranker), or a path
    ranker_depth: int = 100  # learned: every retriever's top this many go to the ranker
    # learned: blend the trees' order with the plain BM25 + dense RRF order of the same lists,
    # (1 - w) / (k + learned rank) + w / (k + RRF rank); 0: the trees' order alone
    # (docs/reports/2026-11-23-late-blend-rrf.md)
    ranker_rrf_weight: float = 0.2
    # learned: that weight for a short question ("how do I ...", "why does ...", or ending in
    # "?"): the trees were trained on docstrings and commit subjects, and RRF ranks the prose
    # questions want better (docs/reports/2026-11-27-question-blend-validation.md)
    ranker_question_rrf_weight: float = 0.65
    ranker_blend_k: int = 10  # learned: the k of that blend
    # file-level answers (--files, group "file"): the whole-file BM25 list's weight when it
    # is fused (RRF, k 10) with the files of the span list; 0: the span list alone
    # (docs/reports/2026-11-27-whole-file-bm25-validation.md)
    file_bm25_weight: float = 0.2
    # file-level answers: learned: the learned file ranker reorders the first 40 files of
    # that fused order (llmc/models/file_ranker; llmc/search/file_ranker.py) | fusion: the
    # fused order as it is (docs/reports/2026-11-27-file-ranker-validation.md)
    file_ranker: str = "learned"
    # learned: per-file cap on its results (0: none); fusion keeps max_per_file
    ranker_max_per_file: int = 0
    # when none of the first code_in_top results is code (markdown, rst and text are not),
    # the best-ranked code result of the top max(k, 10) moves up to rank code_in_top (0: off;
    # never on a docs route the user chose; docs/reports/2026-11-23-code-in-top-validation.md)
    code_in_top: int = 3
    # only when the router's p_code is at least this (0: every query; chosen on validation)
    code_in_top_p: float = 0.0
    # latency budget per query (ms): a costly stage on by default (HyDE's LLM,
    # the cross-encoder, the LLM rerank) is skipped when its learned cost would break what
    # is left of it; a stage you switch on yourself runs anyway (docs/configuration.md,
    # "Latency budget and profiles"). 0: no budget
    budget_ms: float = 150.0
    profile: str = "auto"  # auto (gpu when CUDA/MPS is usable, else cpu) | cpu | gpu


@dataclass
class GraphConfig:
    """The repository graph (llmc.graph): .llmc/rag_graph.json and `llmc graph`."""

    enabled: bool = True  # build the graph with every `llmc index`
    # Files larger than this (bytes) are not parsed; their definitions come from the index.
    max_file_size: int = 2_000_000
    # Resolve a call by name when exactly one definition in the repository carries it.
    name_fallback: bool = True
    deps_depth: int = 1  # default --depth of `llmc graph deps`
    # A daemon keeps the graph's state in memory between updates (fast one-file updates)
    # only up to this many indexed files: ~85 KB a file (1.5 GB on 17,870); past it each
    # update reads the facts cache again, in bounded memory.
    warm_max_files: int = 12_000


@dataclass
class ExpandConfig:
    """Graph-neighbor expansion and graph priors (llmc.search.expand); switch: search.graph."""

    top_n: int = 5  # add graph neighbors of this many top fused results
    edge_types: list[str] = field(
        default_factory=lambda: ["calls", "imports", "inherits", "tests", "mentions"]
    )  # edge types followed, both directions (defines calls imports inherits tests mentions)
    alpha: float = 0.5  # an added neighbor scores its source's score times this
    per_source: int = 3  # at most this many neighbors added per source
    min_confidence: float = 0.6  # edges resolved with less confidence are not followed
    hub_degree: int = 50  # skip neighbors with more edges than this unless retrieval found them
    semantic_floor: float = 0.3  # add a neighbor only if its cosine to the query reaches this
    mutual_support: float = 0.0  # prior: score bonus (times its score) per linked top result
    degree_prior: float = 0.0  # prior: weight of log(1 + degree) / log(1 + hub_degree)
    pagerank_prior: float = 0.0  # prior: weight of PageRank over the candidate subgraph


@dataclass
class RerankConfig:
    """Cross-encoder rerank of the top results (llmc.search.rerank); switch: search.rerank."""

    model: str = "default"  # default: the reranker shipped in llmc; or an HF name / local path
    top_k: int = 20  # rerank this many fused results; the rest keep their order below them
    batch_size: int = 32  # (query, span) pairs per forward pass
    blend: str = "blend"  # blend: mix with the fused score | replace: rerank score alone orders
    blend_weight: float = 0.3  # blend: w * reranker probability + (1 - w) * fused / top fused
    max_length: int = 128  # tokens per (query, span) pair; longer spans are cut (trained at 128)
    device: str = "auto"  # auto (cuda > mps > cpu) | cuda | mps | cpu
    precision: str = "auto"  # auto: fp16 on CUDA, bf16 on CPUs with AVX512-BF16/AMX, else fp32


@dataclass
class LLMRerankConfig:
    """LLM listwise rerank of the top few (llmc.search.llm_rerank); switch: search.llm_rerank."""

    top_n: int = 8  # candidates shown to the LLM (5-10); the rest keep their places below
    always: bool = False  # skip the gate and rerank every query (`llmc search --llm-rerank`)
    close_margin: float = 0.1  # gate: #1 leads #2 by at most this share of the top_n score spread
    min_query_words: int = 12  # gate: rerank queries of at least this many words
    budget_ms: float = 4000.0  # latency budget: the LLM call's timeout; over it keeps the order
    snippet_lines: int = 6  # lines per candidate after its signature (the prompt stays short)
    max_tokens: int = 64  # answer length limit (a permutation of top_n ids)


@dataclass
class LLMConfig:
    """Local LLM (llmc.models.llm): auto = ollama if reachable, else embedded, else none."""

    provider: str = "auto"  # auto | ollama | embedded | openai | none
    ollama_host: str = ""  # empty: $OLLAMA_HOST, else http://127.0.0.1:11434
    ollama_model: str = "qwen2.5-coder:1.5b"
    embedded_model: str = "default"  # path to a .gguf, or default (SmolLM2-135M-Instruct)
    max_tokens: int = 256
    temperature: float = 0.0
    timeout_s: float = 30.0
    probe_timeout_s: float = 0.5  # ollama health check in auto and doctor
    n_threads: int = 0  # embedded; 0: half the usable CPUs (at least 1)
    n_ctx: int = 2048  # embedded context window (prompt + answer)
    # openai: an OpenAI-compatible server (/v1/chat/completions), e.g. http://127.0.0.1:8080/v1
    base_url: str = ""
    openai_model: str = ""  # openai: the model to ask for; empty: the server's first model
    api_key_env: str = ""  # openai: NAME of the environment variable holding the key (not the key)


@dataclass
class HydeConfig:
    """Adaptive HyDE (llmc.search.hyde; switch: search.hyde): for vague questions the local
    LLM ([llm]) writes the answer it expects; its words expand BM25, its embedding searches
    densely. Defaults chosen by `llmc eval` (docs/hyde.md)."""

    mode: str = "auto"  # auto: only vague natural-language queries of `intents` | always
    # Router intents HyDE serves in auto mode (code, docs, mixed); eval: it helps docs only.
    intents: list[str] = field(default_factory=lambda: ["docs"])
    dense_below: float = 1.0  # auto mode: only when raw dense's best cosine is below this (1: any)
    n: int = 1  # hypotheses per query; more than 1 is multi-HyDE, sampled at `temperature`
    temperature: float = 0.7  # sampling when n > 1 (hypothesis i uses seed i); n = 1 is greedy
    max_tokens: int = 96  # hypothesis length cap; lower still if the median span is shorter
    timeout_s: float = 10.0  # LLM time budget for all hypotheses of a query; past it, plain search
    initial_threshold: float = 0.7  # cosine a hypothesis's dense hits must reach at first
    threshold_step: float = 0.1  # lower the threshold by this while nothing reaches it
    min_threshold: float = 0.3  # the lowest threshold; below it the hypothesis finds nothing
    # Fusion weight of the HyDE dense list (times the route weight); 0: diagnostics only.
    # With SmolLM2-135M, 0 beat 0.25, 0.5 and 1 in `llmc eval`; a stronger LLM may earn more.
    weight: float = 0.0
    rocchio: bool = True  # expand the BM25 query with terms of the hypotheses (Rocchio)
    rocchio_alpha: float = 1.0  # Rocchio weight of the original query terms
    rocchio_beta: float = 1.0  # Rocchio weight of the hypotheses' term centroid
    rocchio_max_df: float = 0.1  # expansion terms must occur in less than this share of spans
    max_terms: int = 10  # expansion terms added to the BM25 query at most
    cache: bool = True  # keep hypotheses in .llmc/hyde_cache.db by (query, model, prompt version)


@dataclass
class EvalConfig:
    """`llmc eval` (llmc.eval)."""

    cache_dir: str = ""  # downloaded eval projects; empty: $XDG_CACHE_HOME/llmc/eval
    warmup: int = 1  # untimed queries per variant before latency is measured


@dataclass
class DaemonConfig:
    """`llmc daemon` (llmc.daemon): local API, file watcher, warm models."""

    watch: bool = True  # reindex on file changes (watchdog)
    debounce_ms: int = 300  # quiet time before a burst of changes becomes one reindex
    max_batch_delay_s: float = 5.0  # a never-quiet burst is still indexed this often
    index_on_start: bool = True  # catch up on changes made while no daemon ran
    tcp: bool = False  # also listen on 127.0.0.1 (bearer token in .llmc/daemon.token)
    tcp_port: int = 0  # 0: any free port (written to .llmc/daemon.json)
    max_request_bytes: int = 1_048_576  # larger bodies get 413
    request_timeout_s: float = 60.0  # slower requests get 504 (the daemon keeps serving)
    # concurrent connections per pool (the Unix socket; TCP that sent the token; tokenless
    # TCP has its own 4): more get 503 (docs/daemon-api.md, "Limits")
    max_connections: int = 32
    start_timeout_s: float = 60.0  # `llmc daemon start` waits this long for the socket
    client_timeout_s: float = 0.5  # `llmc search` waits this long for a daemon to answer


@dataclass
class TeamConfig:
    """The team store (llmc.team): a shared index in PostgreSQL + pgvector (user-only)."""

    url: str = ""  # postgresql://user@host:5432/db (no password: that is password_env's)
    search_url: str = ""  # where team searches read (a read replica); empty: url
    password_env: str = "LLMC_TEAM_PASSWORD"  # the environment variable holding the password
    repo: str = ""  # this repository's name in the store; empty: its directory's name
    publish: bool = False  # publish after each index run of a git hook or the daemon
    ranking: str = "union"  # union: one ranking over the searched repositories; merge: each ranked alone, ranks merged


@dataclass
class LearnConfig:
    """Labels, query log and per-repo tuning (llmc.learn): `llmc label`, `llmc tune`."""

    use_tuned: bool = True  # search applies .llmc/tuned/ (weights, intent model) from `llmc tune`
    tuned_dir: str = ""  # where search reads tuned weights; empty: .llmc/tuned in the repo
    log_queries: bool = True  # log CLI searches to .llmc/queries.jsonl (`llmc label --from-log`)
    query_log_max: int = 5000  # entries kept in the query log; older ones are dropped
    labeler: str = ""  # name stored with your labels; empty: git user.name, else $USER
    label_k: int = 5  # results shown per query when labeling
    holdout: float = 0.3  # share of queries `llmc tune` keeps out of fitting, to measure on
    seed: int = 0  # seed of the held-out split and the weight search
    min_queries: int = 12  # `llmc tune` refuses to fit on fewer judged queries than this
    git_commits: int = 300  # commits `llmc eval --from-git` / `llmc tune --from-git` read
    max_commit_files: int = 8  # mined commits touching more non-test files are skipped


__all__ = [
    "DaemonConfig",
    "EmbeddingConfig",
    "EvalConfig",
    "ExpandConfig",
    "GraphConfig",
    "HydeConfig",
    "IndexConfig",
    "LLMConfig",
    "LLMRerankConfig",
    "LearnConfig",
    "RerankConfig",
    "SearchConfig",
    "TeamConfig",
]
