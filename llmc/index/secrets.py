"""Secrets by content: every file's text is scanned before it is indexed.

A file with a high-confidence secret (a cloud or forge token, a private key block, a JWT, a
``password = "..."`` whose value looks generated) is skipped as ``secret-content``, its
detail naming the line and the kind, never the value; with ``index.redact_secrets`` it is
indexed with each value replaced by ``[REDACTED]`` (lines keep their numbers).

Cost: the token rules are the detect-secrets plugins' (``PLUGINS``), but detect-secrets
run as it comes (``SecretsCollection.scan_file``, every plugin on every line) read 0.25
MB/s of sklearn's code, ~6x the time of indexing it without vectors. Here a few regexes
with literal prefixes (``_LITERALS``) look for the tokens' fixed parts over the whole text;
only the lines a token pattern (``_ANCHORS``) hits, or that assign a 40-character value (an
AWS secret key), are handed to the plugins (detect-secrets is imported on the first hit),
which confirm the token and give its value. ``llmc.index.secret_rules`` adds the shapes the
plugins miss (unquoted and YAML values, credentials in URLs: BasicAuth's pattern, Bearer and
Basic headers, Google and Anthropic keys, a token split across string literals, detect-secrets'
keyword list, a high-entropy value under a name that ends in key) and the documented example
keys that are never secrets. Private key blocks and generic assignments are matched here
(the plugin flags a ``BEGIN ... PRIVATE KEY`` line even with no key after it, and its keyword
plugin flags ``password = "test"``, its entropy plugins every quoted base64 string): a
private key needs a body, an assigned value must look generated (length, character classes,
entropy; stricter in test files, where fixtures hold made-up passwords). Measured (AMD EPYC,
2 shared cores, ``benchmarks/bench_secret_scan.py``, scanner 3 -> 4): llmc's 3.6 MB 33 -> 28
MB/s, transformers' 53.6 MB 42 -> 37, sklearn's 13.5 MB 39 -> 37; inside a full ``llmc index
--no-vectors`` of llmc (6 MB) or sklearn (15 MB) the scan is 0.6-0.8 s of 4.5-12 s (it runs
in the indexer's process, beside the chunk workers).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from llmc.index.secret_rules import (
    about_a_secret,
    documented_example,
    entropy,
    extra_hits,
    high_entropy,
    keyish,
)

SECRET_CONTENT = "secret-content"
REDACTED = "[REDACTED]"
KEYWORD = "Secret Keyword"  # a generic ``password = "..."`` finding
# Bump when a rule changes: an index built under other rules reads every file again.
SCANNER_VERSION = "4"

# detect-secrets plugins used (module, class); the rest are left out as too noisy on code
# (Twilio's AC/SK + 32 hex matches hashes, the keyword plugin, the entropy plugins).
PLUGINS = (
    ("aws", "AWSKeyDetector"),
    ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"),
    ("slack", "SlackDetector"),
    ("stripe", "StripeDetector"),
    ("jwt", "JwtTokenDetector"),
    ("openai", "OpenAIDetector"),
    ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
)

# The fixed parts of the tokens those plugins find: a text without one (nearly every file)
# costs one regex search; an AWS secret access key is found among the assigned values.
_LITERALS = tuple(
    re.compile(p)  # apart, each has a literal prefix: ~2x faster than one alternation
    for p in (
        r"A(?:KIA|SIA|BIA|CCA|3T|ccountKey=)",
        r"gh[pousr]_|github_pat_|gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-",
        r"GR1348941",
        r"[Xx][Oo][Xx][abposrABPOSR]-",
        r"hooks\.slack\.com",
        r"k_live_",
        r"eyJ",
        r"T3BlbkFJ",
        r"pypi-AgE",
        r"SG\.",
    )
)
# The lines worth handing to the plugins, in a text that has one of the literals.
_ANCHORS = re.compile(
    r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}"
    r"|[Aa][Ww][Ss].{0,40}['\"][0-9a-zA-Z/+]{40}['\"]"
    r"|gh[pousr]_[A-Za-z0-9_]{36}|github_pat_[A-Za-z0-9_]{22,}"
    r"|gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941"
    r"|[Xx][Oo][Xx][abposrABPOSR]-|hooks\.slack\.com/services/"
    r"|[rs]k_live_|eyJ[A-Za-z0-9_=-]+\.|T3BlbkFJ|pypi-AgE|SG\.[\w-]{22}\.|AccountKey="
)
# A fine-grained GitHub token: newer than detect-secrets 1.5's GitHub plugin.
_GITHUB_PAT = re.compile(r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}")
_AWS_SECRET = re.compile(r"[0-9a-zA-Z/+]{40}")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-.+/=]*")

_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----"
    r"(?P<body>[^'\"`]{40,16384}?)"
    r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
)
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{16,}")
_PUTTY = re.compile(r"PuTTY-User-Key-File-[0-9]+:[^\n]*\n(?:[^\n]*\n){0,8}?Private-Lines: *\d+\n")

# A quoted value of 8+ characters after `=`, `:` or `=>`: the candidates for an assignment
# (the operator first, because a regex that starts with a keyword alternation scans at a
# tenth of the speed); ``_KEY_BEFORE`` then checks the name in front of it.
_VALUE = re.compile(r"[=:>][ \t]*[rbuRBU]{0,2}(?P<q>['\"])(?P<value>[^'\"`\s\\]{8,256})(?P=q)")
_KEY_BEFORE = re.compile(
    r"(?P<name>(?i:(?:passw(?:or)?d|passwd|pwd|secret|contrase[ñn]a|credential"
    r"|(?:api|auth|access|private|priv|service|account|client|db|database|signing)[_-]?key"
    r"|(?:db|database|key)_?pass|client_?secret|(?:auth|access|refresh|api|bearer)_?token)"
    r"[A-Za-z0-9_]*|token))"
    r"['\"]?(?:[ \t]*:[ \t]*[A-Za-z_][\w.\[\], |]{0,40})?[ \t]*(?:=>|:=|[:=])?[ \t]*\Z"
)
# Any name before a value, for the names that end in key (``stripeKey``, ``ENCRYPTION_KEY``).
_NAME_BEFORE = re.compile(
    r"(?P<name>[A-Za-z_][\w\-]{0,60})['\"]?(?:[ \t]*:[ \t]*[A-Za-z_][\w.\[\], |]{0,40})?"
    r"[ \t]*(?:=>|:=|[:=])?[ \t]*\Z"
)
# One is in every _KEY_BEFORE and keyish name: a value with none of them before it is no secret.
_KEY_STEMS = ("pass", "pwd", "secret", "key", "token", "auth", "cred", "contras")
_SEPARATORS = re.compile(r"[/_.\-:]+")
_WORD = re.compile(r"(?:[a-z]+|[A-Z][a-z]*|[A-Z]+)[0-9]{0,4}|[0-9]+")
_PLACEHOLDER = re.compile(
    r"example|sample|changeme|change_me|dummy|fake|placeholder|your|xxxx|\*\*\*|redacted"
    r"|\.\.\.|…|\$\{|\{\{|%\(|%s|\||://|^[</.\[\]()]",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    """A secret in a text: its 1-based line, its kind, and where its value is (offsets)."""

    line: int
    kind: str
    start: int
    end: int


def scan(rel: str, text: str) -> list[Finding]:
    """The high-confidence secrets in ``text`` (the file ``rel``), in text order."""
    spans: list[tuple[int, int, str]] = []
    if "PRIVATE KEY" in text:
        for m in _PRIVATE_KEY.finditer(text):
            body = m.group("body")
            if sum(len(r) for r in _BASE64_RUN.findall(body.replace("\\n", "\n"))) >= 40:
                spans.append((m.start("body"), m.end("body"), "Private Key"))
    if "PuTTY-User-Key" in text:
        for m in _PUTTY.finditer(text):
            spans.append((m.end(), _block_end(text, m.end()), "Private Key"))
    strict = _is_test_path(rel)
    lines: list[int] = []  # starts of the lines to hand to the plugins
    for m in _VALUE.finditer(text):
        start, value = m.start(), m.group("value")
        if len(value) == 40 and _AWS_SECRET.fullmatch(value):
            lines.append(text.rfind("\n", 0, start) + 1)  # maybe an AWS secret access key
        lo = max(0, start - 80)
        before = text[lo:start].lower()
        if not any(stem in before for stem in _KEY_STEMS):
            continue  # most values (a JSON file's): no regex needed
        if _secret_assignment(text, lo, start, value, strict):
            spans.append((m.start("value"), m.end("value"), KEYWORD))
    spans.extend(extra_hits(rel, text, lambda v: _looks_generated(v, strict), _plugin_hits))
    if any(p.search(text) for p in _LITERALS):
        lines.extend(_anchored_lines(text))
    if lines:
        for start in sorted(set(lines)):
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            hits = _plugin_hits(text[start:end])
            spans.extend((start + a, start + b, kind) for a, b, kind in hits)
    spans = [s for s in spans if not documented_example(text[s[0] : s[1]])]
    if not spans:
        return []
    spans.sort()
    merged: list[list] = []
    for start, end, kind in spans:
        if merged and start < merged[-1][1]:  # overlapping findings: one value
            merged[-1][1] = max(merged[-1][1], end)
            if merged[-1][2] == KEYWORD:
                merged[-1][2] = kind  # a token's own kind says more
        else:
            merged.append([start, end, kind])
    return [Finding(text.count("\n", 0, s) + 1, kind, s, e) for s, e, kind in merged]


def redact(text: str, findings: list[Finding]) -> str:
    """``text`` with each finding's value replaced by ``[REDACTED]``, line by line, so every
    line keeps its number."""
    parts: list[str] = []
    pos = 0
    for f in sorted(findings, key=lambda f: f.start):
        parts.append(text[pos : f.start])
        parts.append(
            "\n".join(REDACTED if s.strip() else s for s in text[f.start : f.end].split("\n"))
        )
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts)


def describe(findings: list[Finding]) -> str:
    """A skip's detail: lines and kinds, never a value."""
    first = findings[0]
    more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
    return f"line {first.line}: {first.kind}{more}"


def policy() -> str:
    """The rules' identity, recorded with the index (``generated.SKIP_POLICY_KEY``)."""
    return f"secrets{SCANNER_VERSION}"


def _anchored_lines(text: str) -> list[int]:
    """Start offsets of the lines the pre-filter hits."""
    starts: list[int] = []
    for m in _ANCHORS.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if not starts or starts[-1] != start:
            starts.append(start)
    return starts


def _plugin_hits(line: str) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    for plugin in _plugins():
        for value in plugin.analyze_string(line):
            at = line.find(value)
            if not value or at < 0:
                continue
            end = _TOKEN_CHARS.match(line, at + len(value)).end()  # a group: a prefix
            if plugin.secret_type == "AWS Access Key" and not _aws_key_id(line, value, at, end):
                continue
            out.append((at, end, plugin.secret_type))
    for m in _GITHUB_PAT.finditer(line):
        out.append((m.start(), m.end(), "GitHub Token"))
    return out


@functools.cache
def _plugins() -> tuple:
    import importlib

    return tuple(
        getattr(importlib.import_module(f"detect_secrets.plugins.{mod}"), cls)()
        for mod, cls in PLUGINS
    )


def _aws_key_id(line: str, value: str, start: int, end: int) -> bool:
    """Whether an AWS plugin hit stands alone (the plugin also matches inside longer runs,
    such as DNA sequences: ``ACCA`` + 16 letters); a secret access key is kept."""
    if len(value) != 20:
        return True  # the secret access key form
    if value[:4] not in ("AKIA", "ASIA") and not any(c.isdigit() for c in value[4:]):
        return False
    return end - start == 20 and not (start > 0 and line[start - 1].isalnum())


def _secret_assignment(text: str, lo: int, start: int, value: str, strict: bool) -> bool:
    """Whether the quoted ``value`` after ``text[start]`` (an operator) is a secret by the
    name in front of it: a keyword name and a generated-looking value, or a name that ends
    in key (``stripeKey``) and a high-entropy value; never a name about a secret
    (``password_hash``, ``token_url``) or a public key."""
    key = _KEY_BEFORE.search(text, lo, start + 1)
    if key is not None:
        if _public(text, key.start()) or about_a_secret(key.group("name")):
            return False
        return _looks_generated(value, strict)
    name = _NAME_BEFORE.search(text, lo, start + 1)
    if name is None or _public(text, name.start()):
        return False
    return keyish(name.group("name")) and high_entropy(value)


def _public(text: str, at: int) -> bool:
    """Whether the name ending in the keyword at ``at`` says public (``publicKeyToken``)."""
    start = at
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return "public" in text[start:at].lower()


def _block_end(text: str, start: int) -> int:
    """The end of a PuTTY key's private lines (up to its ``Private-MAC`` line)."""
    end = text.find("Private-MAC", start)
    return len(text) if end < 0 else end


def _is_test_path(rel: str) -> bool:
    parts = rel.lower().split("/")
    name = parts[-1]
    return (
        any(
            p in ("test", "tests", "testing", "fixtures", "spec", "specs", "__tests__")
            for p in parts[:-1]
        )
        or name.startswith("test_")
        or name.rsplit(".", 1)[0].endswith(("_test", "_spec", ".test", ".spec"))
        or name == "conftest.py"
    )


def _looks_generated(value: str, strict: bool) -> bool:
    """Whether an assigned value looks like a real secret rather than a word, a name, a
    template or a fixture's made-up password."""
    if len(value) < (12 if strict else 8) or _PLACEHOLDER.search(value):
        return False
    if not re.search(r"\d|[^\w.-]", value):
        return False  # letters, '_', '-', '.': a name or a word
    parts = [p for p in _SEPARATORS.split(value) if p]
    if len(parts) > 1 and all(_WORD.fullmatch(p) for p in parts):
        return False  # words and numbers: a path, a name (``prod/db/password-v2``)
    classes = (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )
    if classes < 2:
        return False
    return entropy(value) >= (3.5 if strict else 3.0)


__all__ = ["Finding", "REDACTED", "SECRET_CONTENT", "describe", "policy", "redact", "scan"]
