"""Plain-TCP connections whose timeouts the kernel keeps (httpcore's network-backend extension point).

httpcore's own socket stream puts each socket in timeout mode and calls ``settimeout`` before
every read and every write, so one request on a kept-alive connection is eleven system calls:
per write and per read an ``ioctl``, a ``poll`` (CPython waits for readiness itself in timeout
mode) and the ``send``/``recv``, plus the checks that the idle connection is still open. Each
of them gives up the GIL, and with 256 questions in flight each hand-off is a wait for the GIL to
come back: the client's own look (one ``poll``) averaged 11 ms of a call's wall time there, on a
2-core machine, slot time the server does not see.

`KernelTimedStream` keeps the socket blocking and gives the read and write timeouts to the kernel
(``SO_RCVTIMEO``/``SO_SNDTIMEO``, set again only when a timeout changes), holds the writes of a
request until its response is read (then sends them under the write timeout they were given), and
spares httpcore's look at whether the connection is still open when it was seen open an instant
before (by the client's own look, or by the read that ended the response). A request is then three
system calls: one ``poll``, one ``send``, one ``recv``. A read or write that times out is
httpcore's `~httpcore.ReadTimeout` or `~httpcore.WriteTimeout`, as before; a send that fails does
not stop the response being read (a server may answer 413 or 401 and close before reading a large
body), as in httpcore; shutting the socket down (what
`teammed.backends.openai_http.OpenAICompatibleClient.close` does to a request in flight) still ends
a blocked read at once.

Only plain TCP on Linux: a TLS connection goes back to httpcore's stream when it starts TLS
(`start_tls`), and other platforms keep httpcore's backend. Connections through a proxy are
httpx's own proxy transports and are not touched.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
import time
from typing import Any

import httpcore
import httpx

__all__ = ["KernelTimedBackend", "KernelTimedStream", "install", "SUPPORTED"]

SUPPORTED = sys.platform == "linux"  # struct timeval as two C longs; SO_RCVTIMEO ends recv with EAGAIN

FRESH_S = 0.002  # a connection seen open this recently stands for one more look


def _timeval(timeout: float | None) -> bytes:
    """``struct timeval`` for ``SO_RCVTIMEO``/``SO_SNDTIMEO``: zero is no timeout; a positive
    timeout is at least one microsecond (zero would mean none)."""
    if timeout is None or timeout <= 0:
        return struct.pack("ll", 0, 0)
    micro = max(1, round(timeout * 1_000_000))
    return struct.pack("ll", *divmod(micro, 1_000_000))


class KernelTimedStream(httpcore.NetworkStream):
    """A blocking plain-TCP socket whose timeouts the kernel enforces; writes wait for the next read."""

    def __init__(self, plain: httpcore.NetworkStream, sock: socket.socket) -> None:
        self._sock = sock
        self._plain = plain  # httpcore's stream of the same socket: get_extra_info and start_tls
        self._armed: dict[int, float | None] = {}  # SO_RCVTIMEO/SO_SNDTIMEO: the timeout each is set to
        self._pending: list[bytes] = []
        self._send_timeout: float | None = None  # of the writes pending
        self._open_at: float | None = None  # when the connection was last seen open (a look, or data read)
        sock.settimeout(None)

    def _arm(self, option: int, timeout: float | None) -> None:
        """Sets ``option`` (``SO_RCVTIMEO`` or ``SO_SNDTIMEO``) to ``timeout`` unless it already is."""
        if option not in self._armed or self._armed[option] != timeout:
            self._sock.setsockopt(socket.SOL_SOCKET, option, _timeval(timeout))
            self._armed[option] = timeout

    def _flush(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        try:
            self._arm(socket.SO_SNDTIMEO, self._send_timeout)
            self._sock.sendall(data)
        except BlockingIOError as exc:  # SO_SNDTIMEO ran out
            raise httpcore.WriteTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.WriteError(exc) from exc

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._open_at = None
        if buffer:
            self._pending.append(bytes(buffer))
            self._send_timeout = timeout

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Sends what was written, then reads. A failed send is not raised before the read: as
        httpcore does with a body it could not send, the response is read anyway (a server may
        answer 413 or 401 from the headers and close without reading the body)."""
        self._open_at = None
        unsent: httpcore.WriteError | None = None
        try:
            self._flush()
        except httpcore.WriteError as exc:
            unsent = exc
        try:
            self._arm(socket.SO_RCVTIMEO, timeout)
            data = self._sock.recv(max_bytes)
        except BlockingIOError as exc:  # SO_RCVTIMEO ran out
            raise httpcore.ReadTimeout(exc) from exc
        except OSError as exc:
            raise (unsent or httpcore.ReadError(exc)) from exc
        if data:
            self._open_at = time.monotonic()
        return data

    def close(self) -> None:
        self._pending.clear()  # a request that never read its response was never complete
        self._sock.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        self._flush()
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):  # the TLS stream is httpcore's, in timeout mode
            self._arm(option, None)
        return self._plain.start_tls(ssl_context, server_hostname, timeout)

    def get_extra_info(self, info: str) -> Any:
        """httpcore's, except that a look at whether the connection is readable (closed by the
        server) is spared once when it was seen open within the last `FRESH_S`: by the client's own
        look just before a request (`teammed.backends.openai_http._Lane.warm`), or by the read that
        just ended a response (httpcore looks when a response closes). Each look gives up the GIL.
        A connection that sat idle is always looked at."""
        if info != "is_readable":
            return self._plain.get_extra_info(info)
        seen, self._open_at = self._open_at, None  # one look spared at most
        if seen is not None and time.monotonic() - seen < FRESH_S:
            return False
        readable = self._plain.get_extra_info(info)
        if not readable:
            self._open_at = time.monotonic()
        return readable


class KernelTimedBackend(httpcore.SyncBackend):
    """httpcore's synchronous backend, with `KernelTimedStream` for TCP connections."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        stream = super().connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                     socket_options=socket_options)
        sock = stream.get_extra_info("socket")
        return KernelTimedStream(stream, sock) if isinstance(sock, socket.socket) else stream


_BACKEND = KernelTimedBackend()


def install(client: httpx.Client) -> bool:
    """Use `KernelTimedBackend` for ``client``'s direct connections (its default transport; the proxy
    transports httpx mounts from the environment are left alone). False, and nothing changed, on
    another platform or an httpx/httpcore whose internals differ (``tests/test_streams.py`` fails then)."""
    if not SUPPORTED:
        return False
    transport = getattr(client, "_transport", None)
    pool = getattr(transport, "_pool", None)
    if not isinstance(transport, httpx.HTTPTransport) or not isinstance(pool, httpcore.ConnectionPool) \
            or not isinstance(getattr(pool, "_network_backend", None), httpcore.SyncBackend):
        return False
    pool._network_backend = _BACKEND
    return True
