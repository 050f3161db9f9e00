"""A local HTTP server on an event loop of its own, for async-job tests and ``bench/async_http.py``.

Thousands of requests may wait on it at once (coroutines, not threads). Paths:

* ``/delay/<ms>``: answers ``200 ok`` after ``ms`` milliseconds;
* ``/gather/<key>/<n>``: answers ``200 ok`` once ``n`` requests of ``key`` are waiting at once,
  or ``504`` after 60 s: it proves that many requests were in flight together without timing
  anything;
* ``/wait/<key>``: answers ``200 ok`` once the test calls :meth:`LocalHTTPServer.release` with
  ``key`` (at once if it did already);
* ``/hold``: never answers (until the server stops).

It counts requests per path prefix (:attr:`LocalHTTPServer.served`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

#: How long ``/gather`` waits for its company, seconds.
GATHER_WAIT_S = 60.0


class LocalHTTPServer:
    """Start with :meth:`start`, stop with :meth:`stop`; :attr:`url` is its base URL."""

    def __init__(self) -> None:
        self.served: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._groups: dict[str, tuple[int, asyncio.Event]] = {}
        self._waits: dict[str, asyncio.Event] = {}
        self.port = 0

    @property
    def url(self) -> str:
        """Return ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalHTTPServer:
        """Listen on a free port of 127.0.0.1; return self."""
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096), self._loop
        ).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        """Close the server and its loop."""

        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def release(self, key: str) -> None:
        """Answer every ``/wait/<key>`` request, now and later."""

        def set_it() -> None:
            self._waits.setdefault(key, asyncio.Event()).set()

        self._loop.call_soon_threadsafe(set_it)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await reader.readline()).decode("latin-1")
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            path = line.split(" ")[1] if line.count(" ") >= 2 else "/"
            status = await self._answer(path.strip("/").split("/"))
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".encode()
            )
            await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _answer(self, parts: list[str]) -> str:
        self.served[parts[0]] += 1
        if parts[0] == "delay":
            await asyncio.sleep(int(parts[1]) / 1000)
            return "200 OK"
        if parts[0] == "gather":
            key, n = parts[1], int(parts[2])
            count, event = self._groups.get(key, (0, asyncio.Event()))
            self._groups[key] = (count + 1, event)
            if count + 1 >= n:
                event.set()
            try:
                await asyncio.wait_for(event.wait(), GATHER_WAIT_S)
            except asyncio.TimeoutError:
                return "504 Gateway Timeout"
            return "200 OK"
        if parts[0] == "wait":
            await self._waits.setdefault(parts[1], asyncio.Event()).wait()
            return "200 OK"
        if parts[0] == "hold":
            await asyncio.Event().wait()
        return "404 Not Found"


async def get(url: str) -> int:
    """GET ``url`` (``http://host:port/path``) with asyncio streams; return the status code."""
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\n\r\n".encode())
        await writer.drain()
        status = await reader.readline()
        await reader.read()
        return int(status.split()[1])
    finally:
        writer.close()


def get_blocking(url: str) -> int:
    """GET ``url`` the sync way (urllib); return the status code."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=GATHER_WAIT_S + 10) as response:
        return int(response.status)
