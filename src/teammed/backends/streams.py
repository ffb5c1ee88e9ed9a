"""Plain-TCP connections whose timeouts the kernel keeps (httpcore's network-backend extension point).

httpcore's own socket stream puts each socket in timeout mode and calls ``settimeout`` before
every read and every write, so one request on a kept-alive connection is eleven system calls:
per write and per read an ``ioctl``, a ``poll`` (CPython waits for readiness itself in timeout
mode) and the ``send``/``recv``, plus the checks that the idle connection is still open. Each
of them gives up the GIL, and with 256 questions in flight every one of those hand-offs is a
wait for the GIL to come back: ~10 ms of a call's wall time each, measured on a 2-core machine,
all of it slot time the server does not see.

`KernelTimedStream` keeps the socket blocking and gives the read and write timeouts to the kernel
(``SO_RCVTIMEO``/``SO_SNDTIMEO``, set again only when the timeout changes), holds the writes of a
request until its response is read, and answers httpcore's look at an idle connection from the
client's own look just before. A request is then three system calls: one ``poll``, one ``send``,
one ``recv``. A read or write that times out is httpcore's
`~httpcore.ReadTimeout`/`~httpcore.WriteTimeout`, as before; shutting the socket down (what
`teammed.backends.openai_http.OpenAICompatibleClient.close` does to a request in flight) still
ends a blocked read at once.

Only plain TCP on Linux: a TLS connection goes back to httpcore's stream when it starts TLS
(`start_tls`), and other platforms keep httpcore's backend. Connections through a proxy are
httpx's own proxy transports and are not touched.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
from typing import Any

import httpcore
import httpx

__all__ = ["KernelTimedBackend", "KernelTimedStream", "install", "SUPPORTED"]

SUPPORTED = sys.platform == "linux"  # struct timeval as two C longs; SO_RCVTIMEO ends recv with EAGAIN


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
        self._armed: float | None | str = "unset"
        self._pending: list[bytes] = []
        self._idle_open = False  # seen open and idle, and nothing read or written since
        sock.settimeout(None)

    def _arm(self, timeout: float | None) -> None:
        if timeout != self._armed:
            value = _timeval(timeout)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
            self._armed = timeout

    def _flush(self, timeout: float | None) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        try:
            self._arm(timeout)
            self._sock.sendall(data)
        except BlockingIOError as exc:  # SO_SNDTIMEO ran out
            raise httpcore.WriteTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.WriteError(exc) from exc

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._idle_open = False
        if buffer:
            self._pending.append(bytes(buffer))

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._idle_open = False
        self._flush(timeout)
        try:
            self._arm(timeout)
            return self._sock.recv(max_bytes)
        except BlockingIOError as exc:  # SO_RCVTIMEO ran out
            raise httpcore.ReadTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ReadError(exc) from exc

    def close(self) -> None:
        self._pending.clear()  # a request that never read its response was never complete
        self._sock.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        self._flush(timeout)
        self._arm(None)  # the TLS stream is httpcore's, in timeout mode
        self._armed = "unset"
        return self._plain.start_tls(ssl_context, server_hostname, timeout)

    def get_extra_info(self, info: str) -> Any:
        """httpcore's, except that an idle connection seen open is not polled again before the next
        read or write: the client looks (`teammed.backends.openai_http._Lane.warm`) and then httpcore
        does, microseconds apart (each look gives up the GIL)."""
        if info != "is_readable":
            return self._plain.get_extra_info(info)
        if self._idle_open:
            return False
        readable = self._plain.get_extra_info(info)
        self._idle_open = not readable
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
