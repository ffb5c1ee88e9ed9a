"""Plain-TCP streams whose timeouts the kernel keeps (`teammed.backends.streams`).

A request on a kept-alive connection is one ``sendall`` and one ``recv`` (httpcore's own stream:
three ``settimeout``, two ``send``, one ``recv``, each giving up the GIL); the timeouts still
end a read or a write; TLS and proxies keep httpx's paths.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpcore
import httpx
import pytest

from teammed.backends import streams
from teammed.backends.openai_http import HTTPStatusError, OpenAICompatibleClient
from tests.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.skipif(not streams.SUPPORTED, reason="kernel-timed streams are Linux only")


def _ok(n, body):
    return 200, {}, completion(json.dumps({"answer": "A"}), prompt_tokens=5, completion_tokens=2)


class _Counting:
    """Counts the socket methods the client's sockets (those connected to ``port``) call: socket.socket
    is a Python class, so its methods can be wrapped."""

    NAMES = ("settimeout", "send", "sendall", "recv", "recv_into")

    def __init__(self, monkeypatch, port: int):
        self.calls: dict[str, int] = dict.fromkeys(self.NAMES, 0)
        for name in self.NAMES:
            original = getattr(socket.socket, name)

            def counted(sock, *args, _name=name, _original=original, **kwargs):
                try:
                    ours = sock.getpeername()[1] == port
                except OSError:
                    ours = False
                if ours:
                    self.calls[_name] += 1
                return _original(sock, *args, **kwargs)

            monkeypatch.setattr(socket.socket, name, counted)


def test_the_direct_client_sends_on_kernel_timed_streams():
    """Fails when httpx or httpcore move the internals `streams.install` relies on (it then leaves
    httpcore's stream in place and says False)."""
    with FakeOpenAI(_ok, keep_alive=True) as server:
        client = OpenAICompatibleClient(server.api_base, api_key="k", timeout_s=5)
        try:
            client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}])
            (lane,) = client._clients
            assert isinstance(lane.stream, streams.KernelTimedStream)
        finally:
            client.close()


def test_a_request_on_a_kept_alive_connection_is_one_send_and_one_receive(monkeypatch):
    with FakeOpenAI(_ok, keep_alive=True) as server:
        client = OpenAICompatibleClient(server.api_base, api_key="k", timeout_s=5)
        try:
            client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}])  # connects
            counting = _Counting(monkeypatch, int(server.api_base.rsplit(":", 1)[1].split("/")[0]))
            for _ in range(3):
                response = client.complete(model="openai/fake", messages=[{"role": "user", "content": "x" * 5000}])
                assert response.choices[0].message.content == '{"answer": "A"}'
        finally:
            client.close()
    assert counting.calls["settimeout"] == 0
    assert counting.calls["send"] == 0
    assert counting.calls["sendall"] == 3  # headers and body together
    assert 3 <= counting.calls["recv"] + counting.calls["recv_into"] <= 6


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(ours, the peer): a connected pair of sockets, both closed when the test ends."""
    ours, peer = socket.socketpair()
    yield ours, peer
    ours.close()
    peer.close()


def _plain(sock: socket.socket) -> httpcore.NetworkStream:
    """httpcore's stream of ``sock`` (what `KernelTimedBackend.connect_tcp` wraps)."""
    from httpcore._backends.sync import SyncStream

    return SyncStream(sock)


def test_writes_wait_for_the_read_and_go_out_in_one_send(pair):
    ours, peer = pair
    stream = streams.KernelTimedStream(_plain(ours), ours)
    stream.write(b"POST / HTTP/1.1\r\n\r\n", timeout=1)
    stream.write(b"body", timeout=1)
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(100)  # nothing sent before the response is read
    peer.setblocking(True)
    peer.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    assert stream.read(100, timeout=1) == b"HTTP/1.1 200 OK\r\n\r\n"
    assert peer.recv(100) == b"POST / HTTP/1.1\r\n\r\nbody"


def test_a_read_past_its_timeout_is_httpcores_read_timeout(pair):
    ours, peer = pair
    stream = streams.KernelTimedStream(_plain(ours), ours)
    started = time.monotonic()
    with pytest.raises(httpcore.ReadTimeout):
        stream.read(100, timeout=0.3)
    assert 0.25 <= time.monotonic() - started < 2
    peer.sendall(b"late")
    assert stream.read(100, timeout=None) == b"late"  # no timeout: the kernel's limit is lifted


@pytest.mark.parametrize("read_timeout", [0.3, 30], ids=["same-as-the-write", "longer-than-the-write"])
def test_a_write_the_peer_never_reads_is_httpcores_write_timeout(pair, read_timeout):
    """Pending writes go out under their own write timeout, whatever the read's."""
    ours, _ = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    stream = streams.KernelTimedStream(_plain(ours), ours)
    stream.write(b"x" * (8 << 20), timeout=0.3)
    started = time.monotonic()
    with pytest.raises(httpcore.WriteTimeout):
        stream.read(100, timeout=read_timeout)
    assert time.monotonic() - started < 3


def test_a_hung_read_ends_at_once_when_its_socket_is_shut_down(pair):
    """What `OpenAICompatibleClient.close` does to a request in flight."""
    ours, _ = pair
    stream = streams.KernelTimedStream(_plain(ours), ours)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stream.read(100, timeout=60)))
    reader.start()
    time.sleep(0.2)
    started = time.monotonic()
    socket.socket.shutdown(ours, socket.SHUT_RDWR)
    reader.join(5)
    assert not reader.is_alive() and got == [b""]
    assert time.monotonic() - started < 1


def test_a_hung_server_times_out_through_the_client():
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()
    port = listener.getsockname()[1]
    client = OpenAICompatibleClient(f"http://127.0.0.1:{port}/v1", api_key="k", timeout_s=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}])
        assert time.monotonic() - started < 3
    finally:
        client.close()
        for sock in accepted:
            sock.close()
        listener.close()


def test_proxied_connections_keep_httpx_own_transport(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = httpx.Client(trust_env=True)
    try:
        assert streams.install(client)
        proxy = client._transport_for_url(httpx.URL("http://example.org/v1"))
        assert proxy is not client._transport
        assert not isinstance(proxy._pool._network_backend, streams.KernelTimedBackend)
    finally:
        client.close()


@pytest.mark.parametrize("timeout, expected", [(None, (0, 0)), (0.0, (0, 0)), (1e-9, (0, 1)), (2.5, (2, 500000)),
                                               (120, (120, 0))])
def test_timeval_never_turns_a_timeout_into_none(timeout, expected):
    import struct

    assert struct.unpack("ll", streams._timeval(timeout)) == expected


def test_a_look_is_spared_once_right_after_the_connection_was_seen_open_and_never_after_idling(pair):
    ours, peer = pair
    plain = _plain(ours)
    looks: list[bool] = []

    class Looking:
        def get_extra_info(self, info):
            value = plain.get_extra_info(info)
            if info == "is_readable":
                looks.append(value)
            return value

    stream = streams.KernelTimedStream(Looking(), ours)
    assert stream.get_extra_info("is_readable") is False  # the client's look before a request
    assert stream.get_extra_info("is_readable") is False  # httpcore's, just after: spared
    assert stream.get_extra_info("is_readable") is False  # only once
    assert looks == [False, False]
    stream.write(b"GET / HTTP/1.1\r\n\r\n", timeout=1)
    peer.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    stream.read(100, timeout=1)
    assert stream.get_extra_info("is_readable") is False  # httpcore's when the response closes: spared
    assert looks == [False, False]
    stream.write(b"GET / HTTP/1.1\r\n\r\n", timeout=1)
    peer.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    stream.read(100, timeout=1)
    time.sleep(3 * streams.FRESH_S)
    peer.close()  # the server closed the connection while it was idle: every look sees it
    assert stream.get_extra_info("is_readable") is True
    assert stream.get_extra_info("is_readable") is True
    assert looks == [False, False, True, True]


@pytest.mark.parametrize("connects_elsewhere", [False, True], ids=["on-the-caller", "via-connect-with"])
def test_a_connection_the_server_closed_while_idle_is_replaced_not_failed(connects_elsewhere):
    """A server keep-alive shorter than the client's (gunicorn's is 2 s): the next request reconnects."""
    with FakeOpenAI(_ok, keep_alive=True, idle_close_s=0.3) as server:
        client = OpenAICompatibleClient(server.api_base, api_key="k", timeout_s=5)
        connect_with = (lambda post: post()) if connects_elsewhere else None
        try:
            for _ in range(2):
                client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}],
                                connect_with=connect_with)
                time.sleep(0.8)  # the server has closed it
        finally:
            client.close()
    assert len(server.requests) == 2


def test_an_early_error_answer_to_a_body_the_server_never_read_is_the_answer():
    """A server may answer 413 or 401 from the headers and close without reading a large body (an
    image): the answer is the error, as with httpcore's own stream, not a failed send retried."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(65536)
        body = b'{"error": {"message": "request too large"}}'
        conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\n"
                     b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    port = listener.getsockname()[1]
    client = OpenAICompatibleClient(f"http://127.0.0.1:{port}/v1", api_key="k", timeout_s=10)
    try:
        with pytest.raises(HTTPStatusError) as raised:
            client.complete(model="openai/fake", messages=[{"role": "user", "content": "x" * (16 << 20)}])
        assert raised.value.status_code == 413
    finally:
        client.close()
        listener.close()
