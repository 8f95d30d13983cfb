"""Name-only call guesses, told apart by the receiver's name.

A call the resolver cannot place (``adapter.send(r)`` where ``adapter`` came out of a
dict) is kept as a name-only edge to ``?send``, and every ``send`` in the repository
shares those guesses: ``sock.send`` in a test server as much as the session that really
calls ``HTTPAdapter.send``. The edge keeps the receiver's last word (``via`` =
``name:adapter``), and ``where-used`` lists first the guesses whose receiver is named
like the method's class or one of its bases (``adapter`` in ``HTTPAdapter``,
``http_adapter``), still as guesses (below ``GUESSES_UP_TO``). IDEs' "usages by name"
order candidates the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NAME_VIA = "name"
RECEIVER_NAMED = 0.45  # a name-only guess whose receiver is named like the class
_WORD = re.compile(r"[A-Za-z_]\w{0,63}")
_NOT_A_HINT = frozenset({"self", "cls", "this", "super", "it", "obj", "x", "o"})


def name_via(receiver: str) -> str:
    """``via`` of a name-only call edge: ``name:<receiver's last word>`` when the receiver
    ends in a plain name (``self._adapter`` → ``name:adapter``), else ``name``."""
    last = re.split(r"\.|::|->", receiver.strip())[-1] if receiver else ""
    if not _WORD.fullmatch(last):
        return NAME_VIA
    word = last.strip("_").lower()
    if len(word) < 3 or word in _NOT_A_HINT:
        return NAME_VIA
    return f"{NAME_VIA}:{word}"


def receiver_of(via: str) -> str:
    """The receiver word ``name_via`` kept ('' when none)."""
    return via.partition(":")[2] if via.startswith(NAME_VIA + ":") else ""


def named_like(receiver: str, classes: Iterable[str]) -> str:
    """The class in ``classes`` the receiver word is named after ('' when none): the
    class name ends with it (``adapter`` / ``HTTPAdapter``) or it ends with the class
    name (``http_adapter`` / ``HTTPAdapter``), underscores and case aside."""
    word = receiver.replace("_", "")
    if len(word) < 3:
        return ""
    for cls in classes:
        name = cls.replace("_", "").lower()
        if len(name) >= 3 and (name.endswith(word) or word.endswith(name)):
            return cls
    return ""


__all__ = ["NAME_VIA", "RECEIVER_NAMED", "name_via", "named_like", "receiver_of"]
