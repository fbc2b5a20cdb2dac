"""Start the course's JupyterLab for a test, exactly as `make lab` does, in a sandbox.

The server gets a temporary root (a copy of the notebooks: Lab autosaves, so it must never
serve the committed files), temporary Jupyter config/runtime/data dirs (nothing of the
user's is read or touched), a free port and a random token.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tools.lab import lab_command, lab_env, new_token


@dataclass
class LabServer:
    url: str
    token: str
    port: int
    root: Path
    process: subprocess.Popen[bytes]

    def get(self, path: str, *, with_token: bool = True) -> tuple[int, bytes]:
        """GET ``path``; returns (status, body) without raising on HTTP errors."""
        request = urllib.request.Request(self.url + path)
        if with_token:
            request.add_header("Authorization", f"token {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_lab(
    notebooks: Path,
    tmp: Path,
    *,
    timeout: float = 90,
    settings: dict[str, dict[str, object]] | None = None,
) -> Iterator[LabServer]:
    """Serve a copy of ``notebooks`` from ``tmp``; ``settings`` maps "package:plugin" to values."""
    for plugin, values in (settings or {}).items():
        package, name = plugin.split(":")
        path = tmp / "settings" / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    root = tmp / "root"
    root.mkdir()
    for notebook in sorted(notebooks.glob("*.ipynb")):  # notebooks only: no stray files
        shutil.copy2(notebook, root / notebook.name)
    jupyter = {
        "JUPYTER_CONFIG_DIR": tmp / "config",
        "JUPYTER_RUNTIME_DIR": tmp / "runtime",
        "JUPYTER_DATA_DIR": tmp / "data",
        "JUPYTERLAB_SETTINGS_DIR": tmp / "settings",
        "JUPYTERLAB_WORKSPACES_DIR": tmp / "workspaces",
        "IPYTHONDIR": tmp / "ipython",
    }
    token, port = new_token(), free_port()
    env = lab_env(token) | {k: str(v) for k, v in jupyter.items()}
    env.pop("JUPYTER_PATH", None)
    log = (tmp / "lab.log").open("wb")
    process = subprocess.Popen(
        lab_command(root, port=port, open_browser=False),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
    )
    server = LabServer(f"http://127.0.0.1:{port}", token, port, root, process)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError("JupyterLab exited:\n" + (tmp / "lab.log").read_text())
            with contextlib.suppress(OSError):
                status, body = server.get("/api/status")
                if status == 200 and "started" in json.loads(body):
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("JupyterLab did not start:\n" + (tmp / "lab.log").read_text())
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        os.sync()
