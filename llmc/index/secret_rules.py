"""The secret shapes ``llmc.index.secrets`` finds beyond detect-secrets' token plugins.

Found indexed by `llmc search <value>` before these rules (issue 41): unquoted assignments
(``AWS_SECRET_ACCESS_KEY=...`` in a shell or ``.env``-like file, ``ENV API_KEY ...`` in a
Dockerfile, YAML ``password: ...``), credentials in a URL (``postgres://user:pass@host``:
detect-secrets' BasicAuth plugin's pattern, with templates left out), Google API keys
(``AIza...``), Anthropic keys (``sk-ant-...``), and a token split across adjacent string
literals (``"ghp_abc" + "def..."``). Each rule has a cheap literal pre-filter, so a file
without the literal costs one substring search.

Unquoted values are looked for in configuration, shell, docs and text files only: in code a
secret is a string literal (quoted, found by the assignment rule), while an unquoted value is
an expression (``api_key = settings.API_KEY_V2``). Documented example keys (the AWS docs'
``AKIAIOSFODNN7EXAMPLE`` pair, ``DOCUMENTED_EXAMPLES``) are never findings.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Keys published in vendors' documentation as examples: never a secret, often in docs.
DOCUMENTED_EXAMPLES = frozenset(
    {
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AKIAI44QH8DHBEXAMPLE",
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    }
)

GOOGLE = re.compile(r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])")
ANTHROPIC = re.compile(r"sk-ant-(?:api|admin)?\d*-?[A-Za-z0-9_\-]{32,}")

# ``NAME=value``, ``export NAME=value``, ``ENV NAME value``, ``name: value`` (YAML, INI),
# the value unquoted and followed only by a comment or the end of the line.
_UNQUOTED = re.compile(
    r"(?m)^[ \t]*(?:export[ \t]+|ENV[ \t]+|-[ \t]+)?"
    r"(?P<key>[A-Za-z_][\w.\-]{0,80})[ \t]*(?:=|:|[ \t])[ \t]*"
    r"(?P<value>[^\s'\"`#;,(){}\[\]<>$]{8,256})[ \t]*(?:#.*)?\r?$"
)
_UNQUOTED_KEY = re.compile(
    r"(?i)passw(?:or)?d|passwd|pwd|secret|api_?key|access_?key|private_?key|token|credential"
    r"|auth_?key|signing_?key"
)
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# Where unquoted values are read as values: configuration, shell, docs, text.
_VALUE_FILES = (
    ".env", ".ini", ".cfg", ".conf", ".config", ".properties", ".yaml", ".yml", ".toml",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd", ".md", ".rst", ".txt", ".tf",
    ".tfvars", ".hcl", ".service", ".envrc", ".npmrc", ".pypirc", ".netrc", ".dockerfile",
)  # fmt: skip
_VALUE_NAMES = ("dockerfile", "containerfile", "makefile", "procfile", "envfile")

# detect-secrets' BasicAuth pattern: ``scheme://user:password@``.
_URL_CREDENTIALS = re.compile(
    r"://[^:/?#\[\]@!$&'()*+,;=\s]+:(?P<value>[^:/?#\[\]@!$&'()*+,;=\s]+)@"
)
_URL_TEMPLATE = re.compile(
    r"^(?:password|passwd|pass(?:word)?_?here|secret|pwd|x+|\*+|%s)$|[<>{}%]", re.I
)

# Adjacent string literals (``"a" "b"``, ``'a' + 'b'``) of token characters, joined before
# the token rules read them; only where one part starts like a token.
_SPLIT_HINT = re.compile(
    r"['\"](?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|sk[-_]|AKIA|ASIA|AIza|SG\.|pypi-)"
)
_SPLIT_CHAIN = re.compile(r"(?:(?P<q>['\"])[A-Za-z0-9_\-./+=]{1,200}(?P=q)[ \t]*\+?[ \t]*){2,8}")
_SPLIT_PART = re.compile(r"(['\"])([A-Za-z0-9_\-./+=]{1,200})\1")

Hits = list[tuple[int, int, str]]


def extra_hits(
    rel: str, text: str, looks_generated: Callable[[str], bool], plugin_hits: Callable[[str], Hits]
) -> Hits:
    """(start, end, kind) of every finding of these rules in ``text``."""
    hits: Hits = []
    if "AIza" in text:
        hits += [(m.start(), m.end(), "Google API Key") for m in GOOGLE.finditer(text)]
    if "sk-ant-" in text:
        hits += [(m.start(), m.end(), "Anthropic API Key") for m in ANTHROPIC.finditer(text)]
    if "://" in text and "@" in text:
        hits += _url_credentials(text)
    if _reads_values(rel):
        hits += _unquoted(text, looks_generated)
    if _SPLIT_HINT.search(text):
        hits += _split_tokens(text, plugin_hits)
    return hits


def documented_example(value: str) -> bool:
    return value.strip("'\"") in DOCUMENTED_EXAMPLES


def _reads_values(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1].lower()
    return (
        name.startswith(".env")
        or name.endswith(_VALUE_FILES)
        or name in _VALUE_NAMES
        or name.startswith(_VALUE_NAMES)
        or "." not in name
    )


def _url_credentials(text: str) -> Hits:
    out: Hits = []
    for m in _URL_CREDENTIALS.finditer(text):
        value = m.group("value")
        if _URL_TEMPLATE.search(value):
            continue  # postgres://user:password@localhost, ://u:${PW}@, ://u:<pw>@
        out.append((m.start("value"), m.end("value"), "Basic Auth Credentials"))
    return out


def _unquoted(text: str, looks_generated: Callable[[str], bool]) -> Hits:
    out: Hits = []
    for m in _UNQUOTED.finditer(text):
        value = m.group("value")
        if not _UNQUOTED_KEY.search(m.group("key")) or _DOTTED_NAME.fullmatch(value):
            continue
        if looks_generated(value):
            out.append((m.start("value"), m.end("value"), "Secret Keyword"))
    return out


def _split_tokens(text: str, plugin_hits: Callable[[str], Hits]) -> Hits:
    out: Hits = []
    for hint in _SPLIT_HINT.finditer(text):
        chain = _SPLIT_CHAIN.match(text, hint.start())
        if chain is None:
            continue
        joined = "".join(p.group(2) for p in _SPLIT_PART.finditer(chain.group(0)))
        found = plugin_hits(joined) or [
            (m.start(), m.end(), kind)
            for rule, kind in ((GOOGLE, "Google API Key"), (ANTHROPIC, "Anthropic API Key"))
            for m in rule.finditer(joined)
        ]
        if found:
            out.append((chain.start(), chain.end(), found[0][2]))
    return out


__all__ = ["DOCUMENTED_EXAMPLES", "documented_example", "extra_hits"]
