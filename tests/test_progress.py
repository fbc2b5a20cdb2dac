"""``python -m tools.progress``: a learner's own table from their log, and the instructor's
learner × exercise table read through a (fake) JupyterHub, printed and written as CSV.

The fake hub is a small ``http.server`` on 127.0.0.1 that answers as JupyterHub 6 and the
learners' servers behind its proxy do: the paginated user list, each server's contents API,
403 for a token without the scope, a redirect for a stopped server.
"""

from __future__ import annotations

import csv
import json
import socket
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tools import lab, progress, progress_hub
from tools.course import NOTEBOOKS
from tools.progress import course_exercises, main, parse_log

# Every count and id below comes from the registry (tools/exercises.py), never by hand:
# adding an exercise to a notebook must not fail these tests.
EXERCISES = course_exercises()
IDS = [e.id for e in EXERCISES]
COUNT = len(EXERCISES)
IN_CHAPTER = Counter(e.id[:2] for e in EXERCISES)
TITLES = {e.id: e.title for e in EXERCISES}


def verdict(exercise: str, status: str) -> str:
    line = {"exercise": exercise, "notebook": "workspace/x.ipynb", "passed": status == "passed"}
    return json.dumps(line | {"status": status, "time": "2025-05-01T09:30:00+00:00"})


ALICE_LOG = "\n".join(
    [
        verdict("00-cube", "not implemented"),  # Run All on the stub: not trying
        verdict("00-cube", "passed"),
        verdict("01-tanh", "failed"),
        verdict("01-tanh", "failed"),
        '{"exercise": "01-matmul", "passed": tr',  # a line cut short
        verdict("01-matmul", "passed"),
        verdict("01-matmul", "failed"),  # passed once stays passed
        verdict("02-hvp", "failed"),
    ]
)

# name -> the user model's "server" (None: not running) and the log its server holds
LEARNERS: dict[str, tuple[str | None, str | None]] = {
    "alice": ("/user/alice/", ALICE_LOG),
    "bob": (None, None),  # no running server
    "carol": ("/user/carol/", None),  # running, but no log yet
    "dave": ("/user/dave/", verdict("06-dominant-op", "passed")),
    "erin": ("/user/erin/", "stopped"),  # stopped since the list: the hub answers 424
    "frank": ("/user/frank/", "redirect"),  # or a redirect to the hub's spawn page
}
ADMIN, LEARNER, NO_ACCESS, NAMES_ONLY = "admin-token", "alice-token", "no-access", "names-only"


class FakeHub(BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, body: Any, **headers: str) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        token = self.headers.get("Authorization", "").removeprefix("token ")
        self.requests.append(url.path)
        if url.path == "/hub/api/users":
            return self._users(token, query)
        parts = url.path.split("/")  # /user/NAME/api/contents/FILE
        if len(parts) == 6 and parts[1] == "user" and parts[3:5] == ["api", "contents"]:
            return self._contents(token, parts[2], parts[5], query)
        return self._answer(404, {"message": "Not Found"})

    def _users(self, token: str, query: dict[str, str]) -> None:
        if token == LEARNER:
            message = "Action is not authorized with current scopes; requires any of [list:users]"
            return self._answer(403, {"status": 403, "message": message})
        if token not in (ADMIN, NO_ACCESS, NAMES_ONLY):
            return self._answer(403, {"status": 403, "message": "Missing or invalid credentials."})
        names = sorted(LEARNERS)
        offset, limit = int(query.get("offset", 0)), int(query.get("limit", 200))
        models = [
            {"kind": "user", "name": name, "admin": False}
            | ({} if token == NAMES_ONLY else {"server": LEARNERS[name][0]})
            for name in names[offset : offset + limit]
        ]
        following = {"offset": offset + limit} if offset + limit < len(names) else None
        assert self.headers["Accept"] == "application/jupyterhub-pagination+json"
        return self._answer(200, {"items": models, "_pagination": {"next": following}})

    def _contents(self, token: str, name: str, file: str, query: dict[str, str]) -> None:
        server, log = LEARNERS[name]
        if log == "stopped":
            return self._answer(424, {"status": 424, "message": f"{name}'s server is not running"})
        if server is None or log == "redirect":
            self.send_response(302)
            self.send_header("Location", f"/hub/user/{name}/")
            self.end_headers()
            return None
        if token != ADMIN:  # the single-user server checks the token's access:servers
            message = f"user {name!r} is not allowed to access server {name}"
            return self._answer(403, {"message": message, "reason": None})
        assert query == {"content": "1", "type": "file", "format": "text"}
        if log is None or file != "course-progress.jsonl":
            return self._answer(404, {"message": f"No such file or directory: {file}"})
        return self._answer(200, {"name": file, "type": "file", "format": "text", "content": log})


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for proxy in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setattr(progress_hub, "PAGE", 2)  # six learners: three pages
    FakeHub.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as file:
        return {row["learner"]: row for row in csv.DictReader(file)}


# --- the course's exercises ---------------------------------------------------------------------


def test_the_course_has_its_exercises_in_order_with_titles():
    chapters = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert [e.chapter for e in EXERCISES] == sorted(e.chapter for e in EXERCISES)  # in order
    assert list(dict.fromkeys(e.chapter for e in EXERCISES)) == [p.stem for p in chapters]
    assert IDS[0] == "00-cube"
    assert len(set(IDS)) == len(IDS)
    assert all(e.title != e.id and "exercise" in e.title.lower() for e in EXERCISES)
    assert len({e.title for e in EXERCISES}) == COUNT  # each its own heading, none borrowed
    assert TITLES["01-tanh"] == "Exercise 1: Tanh from its derivative"
    assert [e.key for e in EXERCISES[: 1 + IN_CHAPTER["01"]]] == [
        "0.1",
        *(f"1.{n}" for n in range(1, 1 + IN_CHAPTER["01"])),
    ]


# --- reading a log ------------------------------------------------------------------------------


def test_a_log_gives_each_exercise_its_state_and_counts_bad_lines():
    found = parse_log(ALICE_LOG + "\n\n[1, 2]\n" + verdict("99-gone", "passed"), IDS)
    assert found.state("00-cube") == "passed"
    assert found.state("01-tanh") == "tried"
    assert found.state("01-matmul") == "passed"
    assert found.state("02-hvp") == "tried"
    assert found.state("01-round-ste") == "not started"
    assert found.malformed == [5, 10]  # the cut line and the array; the blank line is fine
    assert found.unknown == {"99-gone"}


@pytest.mark.parametrize(
    "line",
    [
        '{"exercise": "00-cube", "passed": "true", "status": "passed"}',  # a string, not a bool
        '{"passed": true}',
        '{"exercise": 3, "passed": true}',
        '{"exercise": "00-cube", "passed": true, "status": 1}',
        "null",
        "\x00\x01",
    ],
)
def test_a_malformed_line_is_skipped_not_counted_as_progress(line):
    found = parse_log(line, IDS)
    assert found.malformed == [1]
    assert found.state("00-cube") == "not started"


def test_a_stub_verdict_alone_is_not_started():
    assert parse_log(verdict("00-cube", "not implemented"), IDS).state("00-cube") == "not started"


# --- a self-learner -----------------------------------------------------------------------------


def test_a_learner_sees_every_exercise_of_the_seven_chapters(tmp_path, capsys):
    log = tmp_path / "course-progress.jsonl"
    log.write_text(ALICE_LOG + "\n")
    assert main(["--log", str(log), "--csv", str(tmp_path / "mine.csv")]) == 0
    out, err = capsys.readouterr()
    for e in EXERCISES:
        assert e.id in out and e.title in out
    assert f"00 · Start here  (1 of {IN_CHAPTER['00']} passed)" in out
    assert f"01 · Custom autograd Functions  (1 of {IN_CHAPTER['01']} passed)" in out
    lines = out.splitlines()
    assert any(line.split()[:2] == ["tried", "01-tanh"] for line in lines)
    assert any(line.split()[:3] == ["not", "started", "01-round-ste"] for line in lines)
    assert f"{COUNT} exercises: 2 passed, 2 tried, {COUNT - 4} not started." in out
    assert "skipped 1 malformed line(s) (first: line 5)" in err
    (mine,) = rows(tmp_path / "mine.csv").values()
    assert (mine["00-cube"], mine["01-tanh"], mine["passed"]) == ("passed", "tried", "2")


def test_the_default_log_is_the_variables_then_the_home_folders(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("JUPYTERHUB_URL", raising=False)
    monkeypatch.delenv("COURSE_PROGRESS_LOG", raising=False)
    (tmp_path / "course-progress.jsonl").write_text(verdict("00-cube", "passed"))
    assert main([]) == 0
    assert f"1 passed, 0 tried, {COUNT - 1} not started" in capsys.readouterr().out
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text(verdict("00-cube", "failed"))
    monkeypatch.setenv("COURSE_PROGRESS_LOG", str(elsewhere))
    assert main([]) == 0
    assert f"0 passed, 1 tried, {COUNT - 1} not started" in capsys.readouterr().out


def test_no_log_yet_is_all_not_started_and_says_why(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_URL", raising=False)
    assert main(["--log", str(tmp_path / "none.jsonl")]) == 0
    out, err = capsys.readouterr()
    assert f"0 passed, 0 tried, {COUNT} not started" in out
    assert "no progress log" in err and "COURSE_PROGRESS_LOG" in err


# --- an instructor, through the hub -------------------------------------------------------------


def test_the_instructor_table_through_the_hub(hub, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", ADMIN)
    target = tmp_path / "class.csv"
    assert main(["--hub", hub + "/hub/", "--csv", str(target)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    table = {line.split()[0]: line for line in out.splitlines() if line[:1].isalpha()}
    marks = dict(zip(IDS, table["alice"].split()[1:], strict=False))
    assert [marks[i] for i in ("00-cube", "01-tanh", "01-matmul", "01-round-ste")] == [
        "ok",
        "~",
        "ok",
        "-",
    ]
    assert "no running server: not started" in table["bob"]
    assert "no log yet: not started" in table["carol"]
    assert "no running server: not started" in table["erin"]
    assert "no running server: not started" in table["frank"]
    tanh = EXERCISES[IDS.index("01-tanh")]
    assert f"{tanh.key}  01-tanh: {tanh.title}" in out
    found = rows(target)
    assert list(found) == ["alice", "bob", "carol", "dave", "erin", "frank"]
    assert list(found["alice"])[1 : 1 + COUNT] == IDS
    assert found["alice"]["00-cube"] == "passed" and found["alice"]["01-tanh"] == "tried"
    assert (found["alice"]["passed"], found["alice"]["tried"]) == ("2", "2")
    assert "skipped 1 malformed line(s)" in found["alice"]["note"]
    assert found["dave"]["06-dominant-op"] == "passed" and found["dave"]["note"] == ""
    assert found["bob"]["not started"] == str(COUNT)
    # Nothing was asked of a server the hub says is stopped; pages of two learners each.
    assert "/user/bob/api/contents/course-progress.jsonl" not in FakeHub.requests
    assert FakeHub.requests.count("/hub/api/users") == 3


def test_the_hub_url_comes_from_the_environment_and_the_csv_defaults(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_URL", hub)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", ADMIN)
    monkeypatch.chdir(tmp_path)
    assert main([]) == 0
    assert rows(tmp_path / "progress.csv")["alice"]["00-cube"] == "passed"


@pytest.mark.parametrize(
    ("token", "scope"),
    [(LEARNER, "list:users"), (NO_ACCESS, "access:servers"), (NAMES_ONLY, "read:users")],
)
def test_a_token_without_a_scope_is_refused_and_the_scope_named(
    hub, tmp_path, capsys, monkeypatch, token, scope
):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", token)
    target = tmp_path / "class.csv"
    assert main(["--hub", hub, "--csv", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"needs the {scope} scope" in err or f"needs {scope}" in err
    assert token not in err  # never print the token
    assert not target.exists()


def test_a_missing_token_is_an_error_before_any_request(hub, capsys, monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    assert main(["--hub", hub]) == 1
    assert "set JUPYTERHUB_API_TOKEN" in capsys.readouterr().err
    assert FakeHub.requests == []


def test_an_unreachable_hub_is_an_error(capsys, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", ADMIN)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["--hub", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach http://127.0.0.1:{port}" in err and "--hub" in err


def test_a_hub_url_without_a_scheme_is_an_error(capsys, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", ADMIN)
    assert main(["--hub", "hub.example.org"]) == 1
    assert "http:// or https://" in capsys.readouterr().err


def test_the_hub_and_a_log_file_do_not_mix(hub, capsys):
    # An instructor reads logs only through the hub, as the token allows, never from disk.
    with pytest.raises(SystemExit):
        main(["--hub", hub, "--log", "/home/alice/course-progress.jsonl"])
    assert "--log" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "root"),
    [
        ("https://hub.example.org", "https://hub.example.org"),
        ("https://hub.example.org/hub/api/", "https://hub.example.org"),
        ("http://10.0.0.1:8000/hub", "http://10.0.0.1:8000"),
        ("https://example.org/jhub/", "https://example.org/jhub"),
    ],
)
def test_the_hub_root_is_found_from_any_of_its_urls(given, root):
    assert progress_hub.hub_root(given) == root


def test_the_log_name_is_the_one_the_hub_sets():
    assert progress.LOG_NAME == "course-progress.jsonl"


def test_make_lab_turns_the_log_on_for_a_self_learner(tmp_path, monkeypatch):
    (tmp_path / "00_start_here.ipynb").write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("COURSE_PROGRESS_LOG", raising=False)
    started: list[dict[str, str]] = []
    monkeypatch.setattr(lab.os, "execvpe", lambda file, args, env: started.append(env))
    lab.main(["--root", str(tmp_path), "--no-browser"])
    assert started[0]["COURSE_PROGRESS_LOG"] == str(tmp_path / "course-progress.jsonl")
    monkeypatch.setenv("COURSE_PROGRESS_LOG", str(tmp_path / "mine.jsonl"))  # kept when set
    lab.main(["--root", str(tmp_path), "--no-browser"])
    assert started[1]["COURSE_PROGRESS_LOG"] == str(tmp_path / "mine.jsonl")


def test_the_csv_keeps_a_spreadsheet_from_running_a_name_as_a_formula(tmp_path):
    target = tmp_path / "class.csv"
    empty = parse_log("", IDS)
    progress.write_csv(target, EXERCISES, {"=1+1": (empty, "-"), "ann": (empty, "")})
    assert list(rows(target)) == ["'=1+1", "ann"]
    assert rows(target)["'=1+1"]["note"] == "'-"
