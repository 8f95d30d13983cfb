"""Regenerate `.llmc.example` and the key tables of `docs/configuration.md` from the
config's sections (llmc/config_sections.py).

Each key's description is the comment on (or just above) its line in the dataclass, so the
code, the example file and the docs cannot drift apart; tests/test_config.py checks that the
example covers every key and holds the defaults.

    python tools/gen_config_docs.py
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path

from llmc.config import Config
from llmc.repo_config import user_only_reason

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "llmc" / "config_sections.py"  # the sections, a comment on each key
BEGIN, END = "<!-- BEGIN KEYS (tools/gen_config_docs.py) -->", "<!-- END KEYS -->"


def comments() -> dict[tuple[str, str], str]:
    """(class name, field) → the comment on its line, or the comment lines just above."""
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    out: dict[tuple[str, str], str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            text = ""
            last = lines[stmt.end_lineno - 1]
            m = re.search(r"#\s*(.*)$", last)
            if m and '"' not in last[last.index("#") :]:
                text = m.group(1).strip()
            above = []
            i = stmt.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#"):
                above.insert(0, lines[i].strip().lstrip("#").strip())
                i -= 1
            out[(node.name, stmt.target.id)] = " ".join([*above, text]).strip()
    return out


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return repr(value)


def sections():
    cfg = Config()
    for f in dataclasses.fields(Config):
        if f.name in ("sources", "ignored"):
            continue
        obj = getattr(cfg, f.name)
        doc = (type(obj).__doc__ or "").strip().splitlines()[0] if type(obj).__doc__ else ""
        yield (
            f.name,
            type(obj).__name__,
            doc,
            [(g.name, getattr(obj, g.name)) for g in dataclasses.fields(obj)],
        )


def main() -> None:
    notes = comments()
    example = [
        "# llmc configuration: every key with its default. Copy to <repo>/llmc.toml or",
        "# ~/.config/llmc/config.toml and keep only what you change. Environment variables",
        "# override files: LLMC_<SECTION>__<KEY>, e.g. LLMC_SEARCH__K=5. See docs/configuration.md.",
    ]
    table = []
    for name, cls, doc, fields in sections():
        example += ["", f"[{name}]"]
        if doc:
            example.append(f"# {doc}")
        table += ["", f"### `[{name}]`", ""]
        if doc:
            table += [doc, ""]
        table += [
            "| key | default | env | in a repository's `llmc.toml` | meaning |",
            "| --- | --- | --- | --- | --- |",
        ]
        for key, value in fields:
            note = notes.get((cls, key), "")
            if note:
                example.append(f"# {note}")
            why = user_only_reason(f"{name}.{key}")
            if why is not None:
                example.append(
                    "# user config or environment only: ignored in a repository's llmc.toml"
                )
            example.append(f"{key} = {toml_value(value)}")
            env = f"LLMC_{name.upper()}__{key.upper()}"
            shown = toml_value(value).replace("|", "\\|")
            repo = "yes" if why is None else f"no: it {why}"
            table.append(f"| `{key}` | `{shown}` | `{env}` | {repo} | {note.replace('|', '/')} |")
    (ROOT / ".llmc.example").write_text("\n".join(example) + "\n", encoding="utf-8")
    doc_path = ROOT / "docs" / "configuration.md"
    text = doc_path.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    doc_path.write_text(text[:start] + "\n" + "\n".join(table) + "\n\n" + text[end:], "utf-8")


if __name__ == "__main__":
    main()
