"""The background daemon: a local HTTP + JSON API on a Unix socket, a file watcher and warm
models for one repository. ``client.try_daemon`` is how commands use it when it runs.

Modules: ``server`` (the process and its HTTP servers), ``api`` (endpoints), ``engine``
(search, graph, reindex queue), ``watcher`` (watchdog, debounced), ``client``,
``control`` (start/stop/status/logs), ``pidfile`` (files in `.llmc/` and the lock).
"""

from llmc.daemon.client import try_daemon

__all__ = ["try_daemon"]
