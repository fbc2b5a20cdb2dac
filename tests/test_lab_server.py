"""`make lab` serves on 127.0.0.1 only and refuses requests without the token."""

from __future__ import annotations

import socket

import pytest

from tests.lab_server import running_lab
from tools.course import REPO
from tools.lab import free_port, lab_command, lab_env

pytestmark = pytest.mark.slow


def test_command_binds_loopback_and_never_disables_the_token(tmp_path):
    cmd = lab_command(tmp_path, port=8888)
    assert "--ServerApp.ip=127.0.0.1" in cmd
    assert not any("token=" in part.lower() or "0.0.0.0" in part for part in cmd)
    with pytest.raises(ValueError, match="token"):
        lab_env("")
    with pytest.raises(ValueError, match="port"):
        lab_command(tmp_path, port=0)


def test_free_port_skips_a_busy_port():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert free_port(taken, tries=5) != taken
    with pytest.raises(RuntimeError, match="no free port"):
        free_port(taken, tries=0)


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # UDP connect sends nothing; it picks a route
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with running_lab(REPO / "notebooks", tmp_path_factory.mktemp("lab")) as server:
        yield server


def test_request_without_token_is_refused(lab):
    status, _ = lab.get("/api/contents", with_token=False)
    assert status == 403
    status, _ = lab.get("/api/contents")
    assert status == 200


def test_wrong_token_is_refused(lab):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{lab.url}/api/contents")
    request.add_header("Authorization", "token not-the-token")
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(request, timeout=10)
    assert excinfo.value.code == 403


def test_server_listens_on_loopback_only(lab):
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to try")
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex((address, lab.port)) != 0, f"port {lab.port} answers on {address}"
