"""Refuse network access from Python, loopback excepted: the course must run offline.

Python imports ``sitecustomize`` at start-up from any folder on ``PYTHONPATH``. Tests put
this folder there for notebook kernels and set ``COURSE_BLOCK_NETWORK=1``; the test process
calls :func:`block_network` itself. Only Python's ``socket`` module is guarded: a kernel's
own ZeroMQ traffic (C sockets, loopback) is unaffected.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable
from typing import Any

MESSAGE = "network access is blocked: the course must work offline (tried to reach {!r})"


def _is_local(host: object) -> bool:
    if not isinstance(host, str):
        return True  # not an internet address (e.g. AF_UNIX paths are bytes or str paths)
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name: resolving it would use the network


def block_network() -> Callable[[], None]:
    """Refuse non-loopback connections and name lookups; return a function that undoes it."""
    original = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
            raise OSError(MESSAGE.format(address[0]))

    def connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        original[0](self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        return original[1](self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, bytes):
            host = host.decode()
        if host is not None and not _is_local(host):
            raise socket.gaierror(MESSAGE.format(host))
        return original[2](host, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo

    def undo() -> None:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = original  # type: ignore[method-assign]

    return undo


if os.environ.get("COURSE_BLOCK_NETWORK") == "1":
    block_network()
