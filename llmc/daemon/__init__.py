"""The background daemon: a local HTTP + JSON API on a Unix socket, a file watcher and warm
models for one repository. ``client.try_daemon`` is how commands use it when it runs.

Modules: ``server`` (the process, its sockets and the uvicorn thread), ``protocol`` (each
HTTP connection: peer check, request deadline, limits), ``asgi`` (the Starlette app: REST
routes and MCP at ``/mcp``), ``api`` (endpoints), ``graphapi`` (graph answers), ``engine``
(search, graph, reindex queue), ``watcher`` (watchdog, debounced), ``client`` (httpx over
the socket), ``answers`` (a search answer back as a ``SearchResponse``), ``control``
(start/stop/status/logs), ``pidfile`` (files in `.llmc/` and the lock).
"""

from llmc.daemon.client import try_daemon

__all__ = ["try_daemon"]
