"""One heading parser (llmc/headings.py): a doc's spans (one a section, llmc/index) and its
graph sections (llmc/graph/docs.py) start on the same lines under the same titles, on
the headings where two scanners used to disagree."""

from __future__ import annotations

import pytest

from llmc.config import IndexConfig
from llmc.graph.docs import extract_doc
from llmc.index.chunk import chunk_file

MD = """\
---
title: Front matter
# not a heading
---

Intro text.

#no-space is a tag, not a heading

Install
=======

Run it.

```sh
# a shell comment, not a heading
pip install llmc
```

    indented code
    -------------

- a list item
- another
---

## Usage ##

Call `run()`.
"""

RST = """\
=========
Reference
=========

Overlined title.

Details
~~~~

Underline shorter than the title but four wide.
"""


def _spans(path: str, text: str) -> list[tuple[str, int]]:
    spans = chunk_file(path, text, "markdown" if path.endswith(".md") else "rst", "doc",
                       IndexConfig())  # fmt: skip
    return [(s.symbol, s.start_line) for s in spans if s.symbol != path.rsplit("/", 1)[-1]]


def _sections(path: str, text: str) -> list[tuple[str, int]]:
    return [(d.name, d.start_line) for d in extract_doc(path, text).defs]


@pytest.mark.parametrize(("path", "text"), [("docs/guide.md", MD), ("docs/ref.rst", RST)])
def test_doc_spans_and_graph_sections_agree(path: str, text: str) -> None:
    assert _spans(path, text) == _sections(path, text)


def test_the_headings_found_are_the_real_ones() -> None:
    assert _sections("docs/guide.md", MD) == [("Install", 10), ("Usage", 27)]
    assert _sections("docs/ref.rst", RST) == [("Reference", 1), ("Details", 7)]
