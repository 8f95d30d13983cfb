"""The secret shapes ``llmc.index.secrets`` finds beyond detect-secrets' token plugins.

Found indexed by `llmc search <value>` before these rules (issue 41): unquoted assignments
(``AWS_SECRET_ACCESS_KEY=...`` in a shell or ``.env``-like file, ``ENV API_KEY ...`` in a
Dockerfile, YAML ``password: ...``), credentials in a URL (``postgres://user:pass@host``:
detect-secrets' BasicAuth plugin's pattern, with templates left out), Google API keys
(``AIza...``), Anthropic keys (``sk-ant-...``), and a token split across adjacent string
literals (``"ghp_abc" + "def..."``). Then, still found after those: an AWS secret key named
anywhere on a line (``RUN AWS_SECRET_ACCESS_KEY=... aws s3 ...``, a comment, a Markdown
span), a name in the middle of a line (``--password=...``), a Kubernetes ``name:``/``value:``
pair, the rest of detect-secrets' keyword list (``db_pass``, ``api-key``), a high-entropy
value under a name ending in ``key`` (``ENCRYPTION_KEY``, ``stripeKey``: detect-secrets'
high-entropy rule, only where a name says key), ``Bearer``/``Basic`` credentials, a URL with an
empty user or a percent-encoded password, and a split across lines or with PHP's ``.``.

Each rule has a cheap literal pre-filter, so a file without the literal costs one substring
search. Unquoted values are looked for in configuration, shell, docs and text files only: in
code a secret is a string literal (quoted, found by the assignment rule), while an unquoted
value is an expression (``api_key = settings.API_KEY_V2``). Documented example keys (the AWS
docs' ``AKIAIOSFODNN7EXAMPLE`` pair, jwt.io's token, Azurite's account key:
``DOCUMENTED_EXAMPLES``) are never findings; a value that only looks like one is.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable

# Keys published in vendors' documentation as examples: never a secret, often in docs.
DOCUMENTED_EXAMPLES = frozenset(
    {
        # AWS: docs.aws.amazon.com, "Understanding and getting your security credentials"
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AKIAI44QH8DHBEXAMPLE",
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        # jwt.io's example token (HS256, "John Doe")
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9l"
        "IiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        # Azurite / the Azure storage emulator's fixed account key (devstoreaccount1)
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
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
# ``NAME=value`` inside a line (``ENV A=1 B=...``, ``--password=...``, a Markdown span): the
# ``=`` first (a regex that starts with a name scans at a tenth of the speed), the name after.
_INLINE_VALUE = re.compile(r"=(?P<value>[^\s'\"`#;,(){}\[\]<>$&|=]{8,256})(?=[\s;&|)`'\"]|\Z)")
_NAME_AT_END = re.compile(r"(?:^|(?<=[\s;&|(`\-]))(?P<key>[A-Za-z_][\w.\-]{0,80})\Z", re.M)
# A Kubernetes / compose env entry: ``- name: DB_PASSWORD`` then ``value: ...``.
_ENV_PAIR = re.compile(
    r"(?m)^[ \t]*-?[ \t]*name:[ \t]*['\"]?(?P<key>[\w.\-]{1,80})['\"]?[ \t]*\r?\n"
    r"[ \t]*value:[ \t]*(?P<q>['\"]?)(?P<value>[^\s'\"#]{8,256})(?P=q)[ \t]*(?:#.*)?\r?$"
)
# detect-secrets' keyword plugin's list (``DENYLIST``) and the token names.
_UNQUOTED_KEY = re.compile(
    r"(?i)passw(?:or)?d|passwd|pwd|secret|token|credential|contrase[ñn]a"
    r"|(?:api|auth|access|private|priv|service|account|client|db|database|signing)[_-]?key"
    r"|(?:db|database|key)[_-]?pass"
)
# A name that ends in key / auth / credentials (``stripe_key``, ``stripeKey``, ``KEY``): a
# secret only if its value is high in entropy (detect-secrets' high-entropy rule, named).
_KEYISH = re.compile(
    r"(?:^|[_\-.])(?i:keys?|auth|credentials?)\Z|(?<=[a-z0-9])(?:Keys?|Auth|Credentials?)\Z"
)
_NOT_SECRET_NAME = re.compile(
    r"(?i)public|publishable|site_?key|cache|primary|foreign|sort|partition|idempot|lookup"
    r"|hot_?key|short|dict|map|group|index|field|column|row|query|label|i18n|translat|finger"
)
# Names of things about a secret, not the secret (``password_hash``, ``token_url``).
_ABOUT_A_SECRET = re.compile(
    r"(?i)(?:hash|digest|url|uri|file|path|dir|name|type|ref|id|len|length|ttl|header|field"
    r"|prompt|label|pattern|regex|format|policy|env|var|version|count|size|min|max)s?\Z"
)
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# Where unquoted values are read as values: configuration, shell, docs, text.
_VALUE_FILES = (
    ".env", ".ini", ".cfg", ".conf", ".config", ".properties", ".yaml", ".yml", ".toml",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd", ".md", ".rst", ".txt", ".tf",
    ".tfvars", ".hcl", ".service", ".envrc", ".npmrc", ".pypirc", ".netrc", ".dockerfile",
)  # fmt: skip
_VALUE_NAMES = ("dockerfile", "containerfile", "makefile", "procfile", "envfile")

# An AWS secret access key under its name, quoted or not, anywhere on a line, in any file.
_AWS_NAMED = re.compile(
    r"(?i:aws)[\w.\-]{0,30}?(?i:secret)[\w.\-]{0,30}['\"]?[ \t]*(?:=>|[=:]|[ \t])[ \t]*['\"]?"
    r"(?P<value>[A-Za-z0-9/+]{32,64})(?![A-Za-z0-9/+=_\-]|\.[A-Za-z0-9])"
)

# detect-secrets' BasicAuth pattern, ``scheme://user:password@``, with an empty user allowed
# (``redis://:pw@``) and a password's own sub-delimiters and percent-escapes kept in it.
_URL_CREDENTIALS = re.compile(
    r"://(?P<user>[^:/?#\[\]@!$&'()*+,;=\s\"`<>]*):(?P<value>[^:/?#\[\]@$'()\s\"`<>{}]+)@"
)
_URL_TEMPLATE = re.compile(
    r"^(?:password|passwd|pass(?:word)?_?here|secret|pwd?|x+|\*+|%s)$|[<>{}]|%(?![0-9A-Fa-f]{2})",
    re.I,
)
# Literal first (``earer``, ``Basic``): a regex that starts with ``\b`` or a class scans slowly.
_BEARER = re.compile(r"earer[ \t]+(?P<value>[A-Za-z0-9\-._~+/]{20,512}=*)")
_BASIC = re.compile(r"Basic[ \t]+(?P<value>[A-Za-z0-9+/]{8,512}={0,2})(?![A-Za-z0-9+/=])")

# Adjacent string literals (``"a" "b"``, ``'a' + 'b'``, ``'a' . 'b'``, over line ends), of
# token characters, joined before the token rules read them.
_SPLIT_CHAIN = re.compile(
    r"(?P<q>['\"])[A-Za-z0-9_\-./+=]{1,200}(?P=q)"
    r"(?:[ \t]*(?:[+.][ \t]*)?(?:\\?\r?\n[ \t]*(?:[+.][ \t]*)?)?"
    r"(?P<r>['\"])[A-Za-z0-9_\-./+=]{1,200}(?P=r)){1,7}"
)
# Where one literal ends and the next begins, one regex per quote: a literal first character
# scans at ~400 MB/s, a class (``['"]``) at ~150. The chain is matched only from the literal
# before a seam.
_SEAMS = tuple(
    re.compile(q + r"[ \t]*(?:[+.][ \t]*)?(?:\\?\r?\n[ \t]*(?:[+.][ \t]*)?)?['\"]")
    for q in ('"', "'")
)
_SPLIT_PART = re.compile(r"(['\"])([A-Za-z0-9_\-./+=]{1,200})\1")
# The fixed starts of the tokens the rules know: a joined chain without one is left alone.
_TOKEN_START = re.compile(
    r"gh[pousr]_|github_pat_|gl(?:pat|dt|ft|rt)-|xox[abposr]-|[rs]k_live_|sk-|A(?:KIA|SIA)"
    r"|AIza|SG\.|pypi-AgE|eyJ|T3BlbkFJ|hooks\.slack\.com"
)

Hits = list[tuple[int, int, str]]


def extra_hits(
    rel: str, text: str, looks_generated: Callable[[str], bool], plugin_hits: Callable[[str], Hits]
) -> Hits:
    """(start, end, kind) of every finding of these rules in ``text``."""
    hits: Hits = []
    if "AIza" in text:
        hits += _keyed(text, GOOGLE, "Google API Key", 4, looks_generated)
    if "sk-ant-" in text:
        hits += _keyed(text, ANTHROPIC, "Anthropic API Key", 7, looks_generated)
    if "://" in text and "@" in text:
        hits += _url_credentials(text)
    if "earer" in text or "Basic " in text:
        hits += _auth_headers(text, looks_generated)
    if "ecret" in text or "ECRET" in text:
        hits += _aws_named(text)
    if _reads_values(rel):
        hits += _unquoted(text, looks_generated)
        if "=" in text:
            hits += _inline(text, looks_generated)
        if "value:" in text:
            hits += _env_pairs(text, looks_generated)
    hits += _split_tokens(text, plugin_hits)
    return hits


def documented_example(value: str) -> bool:
    """Whether a finding's value is a vendor's documented example (``AccountKey=`` and
    quotes around it aside)."""
    value = value.strip("'\"` ")
    return value in DOCUMENTED_EXAMPLES or value.split("=", 1)[-1] in DOCUMENTED_EXAMPLES


def secret_name(name: str, value: str, looks_generated: Callable[[str], bool]) -> bool:
    """Whether ``value`` under ``name`` is a secret: a keyword name (detect-secrets' list)
    with a generated-looking value, or a name ending in key with a high-entropy one."""
    if about_a_secret(name) or "public" in name.lower():
        return False
    if _UNQUOTED_KEY.search(name):
        return looks_generated(value)
    return keyish(name) and high_entropy(value)


def about_a_secret(name: str) -> bool:
    """A name of something about a secret, not the secret (``password_hash``, ``token_url``)."""
    return bool(_ABOUT_A_SECRET.search(name))


def keyish(name: str) -> bool:
    """A name that ends in key / auth / credentials and is not a public or lookup key."""
    return bool(_KEYISH.search(name)) and not _NOT_SECRET_NAME.search(name)


def high_entropy(value: str) -> bool:
    """A value that looks random enough to be a key on its own: 20+ characters, lower and
    upper case and digits, and Shannon entropy near the most its length allows (capped at
    detect-secrets' base64 limit, 4.5); hex digests (at most 4 bits a character) never are."""
    if len(value) < 20 or not (
        any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
    ):
        return False
    return entropy(value) >= min(4.5, 0.8 * math.log2(len(value)))


def entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _reads_values(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1].lower()
    return (
        name.startswith(".env")
        or name.endswith(_VALUE_FILES)
        or name in _VALUE_NAMES
        or name.startswith(_VALUE_NAMES)
        or "." not in name
    )


def _keyed(
    text: str, rule: re.Pattern, kind: str, prefix: int, looks_generated: Callable[[str], bool]
) -> Hits:
    """A vendor key's matches whose random part is not a placeholder (``sk-ant-xxxx...``)."""
    return [
        (m.start(), m.end(), kind)
        for m in rule.finditer(text)
        if looks_generated(m.group(0)[prefix:])
    ]


def _url_credentials(text: str) -> Hits:
    out: Hits = []
    for m in _URL_CREDENTIALS.finditer(text):
        value = m.group("value")
        if _URL_TEMPLATE.search(value) or value == m.group("user"):
            continue  # ://user:password@, ://u:${PW}@, ://u:<pw>@, postgres:postgres@
        out.append((m.start("value"), m.end("value"), "Basic Auth Credentials"))
    return out


def _auth_headers(text: str, looks_generated: Callable[[str], bool]) -> Hits:
    out: Hits = []
    for m in _BEARER.finditer(text):
        if text[m.start() - 1 : m.start()] not in ("B", "b") or _word_before(text, m.start() - 1):
            continue
        if looks_generated(m.group("value")):
            out.append((m.start("value"), m.end("value"), "Bearer Token"))
    for m in _BASIC.finditer(text):
        if _word_before(text, m.start()):
            continue
        try:
            decoded = base64.b64decode(m.group("value"), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        user, sep, password = decoded.partition(":")
        if sep and password and decoded.isprintable() and not _URL_TEMPLATE.search(password):
            out.append((m.start("value"), m.end("value"), "Basic Auth Credentials"))
    return out


def _word_before(text: str, at: int) -> bool:
    return at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")


def _aws_named(text: str) -> Hits:
    """An AWS secret access key under an ``aws..secret..`` name: the value is judged by its
    shape alone (no placeholder words: ``...EXAMPLEKEY`` that is not the docs' is a key)."""
    out: Hits = []
    for m in _AWS_NAMED.finditer(text):
        if high_entropy(m.group("value")):
            out.append((m.start("value"), m.end("value"), "AWS Secret Access Key"))
    return out


def _unquoted(text: str, looks_generated: Callable[[str], bool]) -> Hits:
    out: Hits = []
    for m in _UNQUOTED.finditer(text):
        value = m.group("value")
        if _DOTTED_NAME.fullmatch(value):
            continue
        if secret_name(m.group("key"), value, looks_generated):
            out.append((m.start("value"), m.end("value"), "Secret Keyword"))
    return out


def _inline(text: str, looks_generated: Callable[[str], bool]) -> Hits:
    out: Hits = []
    for m in _INLINE_VALUE.finditer(text):
        value = m.group("value")
        key = _NAME_AT_END.search(text, max(0, m.start() - 81), m.start())
        if key is None or _DOTTED_NAME.fullmatch(value):
            continue
        if secret_name(key.group("key"), value, looks_generated):
            out.append((m.start("value"), m.end("value"), "Secret Keyword"))
    return out


def _env_pairs(text: str, looks_generated: Callable[[str], bool]) -> Hits:
    out: Hits = []
    for m in _ENV_PAIR.finditer(text):
        if secret_name(m.group("key"), m.group("value"), looks_generated):
            out.append((m.start("value"), m.end("value"), "Secret Keyword"))
    return out


def _split_tokens(text: str, plugin_hits: Callable[[str], Hits]) -> Hits:
    out: Hits = []
    done = 0
    for at in sorted(m.start() for seams in _SEAMS for m in seams.finditer(text)):
        if at < done:
            continue
        opening = text.rfind(text[at], max(done, at - 201), at)
        chain = _SPLIT_CHAIN.match(text, opening) if opening >= 0 else None
        if chain is None:
            continue
        done = chain.end()
        joined = "".join(p.group(2) for p in _SPLIT_PART.finditer(chain.group(0)))
        if not _TOKEN_START.search(joined):
            continue
        found = plugin_hits(joined) or [
            (m.start(), m.end(), kind)
            for rule, kind in ((GOOGLE, "Google API Key"), (ANTHROPIC, "Anthropic API Key"))
            for m in rule.finditer(joined)
        ]
        if found and not documented_example(joined[found[0][0] : found[0][1]]):
            out.append((chain.start(), chain.end(), found[0][2]))
    return out


__all__ = [
    "DOCUMENTED_EXAMPLES",
    "about_a_secret",
    "documented_example",
    "entropy",
    "extra_hits",
    "high_entropy",
    "keyish",
    "secret_name",
]
