"""The workshop recipe in deploy/, checked without a hub or a cluster.

- ``course-start`` builds a learner's workspace in their home, never overwrites their file,
  puts a changed course notebook beside it and tells them so in JupyterLab;
- ``jupyterhub_config.py`` loads and says what the workshop needs;
- the Zero to JupyterHub ``config.yaml`` renders a learner's pod with KubeSpawner, offline,
  with the resources, the post-start hook and the environment it promises.

The real hub, with learners logging in, is ``make hub-test`` (tests/hub/).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest
import yaml

from tools.course import REPO

DEPLOY = REPO / "deploy"
COURSE_START = DEPLOY / "course-start"


def _course_start(home: Path, course: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "COURSE_DIR": str(course)}
    env.pop("COURSE_PROGRESS_LOG", None)
    return subprocess.run(
        [sys.executable, str(COURSE_START), *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )


SHOW_ENVIRONMENT = "import json, os; print(json.dumps(dict(os.environ)))"


@pytest.fixture(scope="module")
def first_start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A copy of the course, a learner's home after their first start, and its stdout.

    ``course-start --exec`` (the spawner's command) builds the workspace in an empty home,
    then runs a command that prints its environment. Tests that change them copy them.
    """
    course, home = tmp_path_factory.mktemp("course"), tmp_path_factory.mktemp("home")
    shutil.copytree(REPO / "notebooks", course / "notebooks")
    shutil.copytree(REPO / "tools", course / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    run = _course_start(home, course, "--exec", sys.executable, "-c", SHOW_ENVIRONMENT)
    return course, home, run.stdout


def test_course_start_builds_the_workspace_in_the_home(first_start: tuple[Path, Path, str]) -> None:
    _, home, _ = first_start
    workspace = home / "workspace"
    names = sorted(p.name for p in workspace.glob("*.ipynb"))
    assert names == sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert len(list((workspace / "solutions").glob("*.ipynb"))) == len(names)
    student = nbformat.read(workspace / "01_custom_function.ipynb", as_version=4)
    assert any("YOUR CODE HERE" in c.source for c in student.cells)
    assert not (workspace / "WHAT-CHANGED.md").exists()


def test_course_start_never_overwrites_and_tells_the_learner(
    tmp_path: Path, first_start: tuple[Path, Path, str]
) -> None:
    started_course, started_home, _ = first_start
    course, home = tmp_path / "course", tmp_path / "home"
    shutil.copytree(started_course, course)
    shutil.copytree(started_home, home)  # the workspace its first start built
    mine = home / "workspace" / "01_custom_function.ipynb"
    edited = mine.read_text().replace("YOUR CODE HERE", "MY OWN WORK", 1)
    mine.write_text(edited)
    chapter = course / "notebooks" / "01_custom_function.ipynb"
    nb = nbformat.read(chapter, as_version=4)
    nb.cells[0].source += "\n\nA sentence the course added."
    nbformat.write(nb, chapter)
    _course_start(home, course)  # as the post-start hook
    assert mine.read_text() == edited, "the learner's file was changed"
    assert (home / "workspace" / "01_custom_function.new.ipynb").exists()
    news = (home / "workspace" / "WHAT-CHANGED.md").read_text()
    assert "01_custom_function.new.ipynb" in news


def test_course_start_opens_the_right_page_and_sets_the_environment(
    first_start: tuple[Path, Path, str],
) -> None:
    _, home, stdout = first_start
    seen = json.loads(stdout.strip().splitlines()[-1])
    assert seen["JUPYTERHUB_DEFAULT_URL"] == "/lab/tree/workspace/00_start_here.ipynb"
    assert seen["KINETO_LOG_LEVEL"] == "6" and seen["TORCH_CPP_LOG_LEVEL"] == "ERROR"
    assert seen["COURSE_PROGRESS_LOG"] == str(home / "course-progress.jsonl")
    assert not Path(seen["COURSE_PROGRESS_LOG"]).name.startswith(".")


def _hub_config(**env: str) -> object:
    from traitlets.config.loader import PyFileConfigLoader

    old = dict(os.environ)
    os.environ.update(env)
    try:
        loader = PyFileConfigLoader("jupyterhub_config.py", path=str(DEPLOY))
        return loader.load_config()
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_the_hub_config_says_what_the_workshop_needs() -> None:
    pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e '.[hub]'")
    config = _hub_config(COURSE_INSTRUCTOR="teacher", COURSE_MEM_LIMIT="2G")
    hub = config.JupyterHub
    assert hub.authenticator_class == "firstuseauthenticator.FirstUseAuthenticator"
    assert config.Authenticator.admin_users == {"teacher"}
    assert config.FirstUseAuthenticator.create_users is True
    assert hub.spawner_class == "systemdspawner.SystemdSpawner"
    assert config.Spawner.mem_limit == "2G"
    assert "course-start" in " ".join(config.Spawner.cmd)
    assert any("cull_idle_timeout" in a for a in config.Spawner.args)
    (culler,) = hub.services
    assert "jupyterhub_idle_culler" in culler["command"]
    assert "delete:servers" in hub.load_roles[0]["scopes"]
    assert config.FirstUseAuthenticator.min_password_length == 8
    assert config.Spawner.environment["OMP_NUM_THREADS"] == "1"


@pytest.mark.parametrize(
    ("name", "refused"), [("dpkg", True), ("private", True), ("ada-lovelace", False)]
)
def test_a_learner_cannot_take_a_system_folder_as_their_home(
    tmp_path: Path, name: str, refused: bool
) -> None:
    """SystemdSpawner's dynamic users live in /var/lib/NAME, which systemd would hand over."""
    import re as regex
    from types import SimpleNamespace

    config = _hub_config()
    assert regex.fullmatch(config.Authenticator.username_pattern, name)
    hook = config.Spawner.pre_spawn_hook
    (tmp_path / "dpkg").mkdir()
    (tmp_path / "private" / "ada").mkdir(parents=True)
    (tmp_path / "ada").symlink_to("private/ada")  # systemd's own link: a returning learner
    hook.__globals__["STATE_ROOT"] = tmp_path
    spawner = SimpleNamespace(user=SimpleNamespace(name=name))
    if refused:
        with pytest.raises(RuntimeError, match=f"The name '{name}' belongs to the system"):
            hook(spawner)
    else:
        hook(spawner)
        hook(SimpleNamespace(user=SimpleNamespace(name="ada")))
    for bad in ("Ada", "../etc", "a", "x" * 40, "1abc"):
        assert not regex.fullmatch(config.Authenticator.username_pattern, bad), bad


TLJH_MAIN = """
c = get_config()
c.JupyterHub.spawner_class = "tljh.user_creating_spawner.UserCreatingSpawner"
c.JupyterHub.authenticator_class = "firstuseauthenticator.FirstUseAuthenticator"
c.JupyterHub.proxy_class = "traefik_file"
c.JupyterHub.hub_port = 15001
c.Spawner.mem_limit = "2G"
c.Spawner.default_url = "/lab"
c.JupyterHub.services = [{"name": "cull-idle"}]
load_subconfig("jupyterhub_config.d/course.py")
"""


def test_linked_into_tljh_it_sets_only_the_learners_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As TLJH loads it: after TLJH's own config, through a link in jupyterhub_config.d/."""
    from traitlets.config.loader import PyFileConfigLoader

    (tmp_path / "jupyterhub_config.d").mkdir()
    (tmp_path / "jupyterhub_config.d" / "course.py").symlink_to(DEPLOY / "jupyterhub_config.py")
    (tmp_path / "jupyterhub_config.py").write_text(TLJH_MAIN)
    monkeypatch.setitem(sys.modules, "tljh", types.ModuleType("tljh"))
    monkeypatch.delenv("COURSE_DIR", raising=False)
    monkeypatch.delenv("COURSE_PYTHON", raising=False)
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(tmp_path)).load_config()
    hub = config.JupyterHub
    # TLJH's own choices stand
    assert hub.spawner_class == "tljh.user_creating_spawner.UserCreatingSpawner"
    assert hub.proxy_class == "traefik_file" and "bind_url" not in hub
    assert hub.services == [{"name": "cull-idle"}] and config.Spawner.mem_limit == "2G"
    assert "admin_users" not in config.Authenticator  # TLJH's --admin stands
    # learners may sign up (TLJH's FirstUseAuthenticator default is create_users=False)
    assert config.FirstUseAuthenticator.create_users is True
    # the course's learner server, in TLJH's user environment, from the linked-to course
    assert config.Spawner.cmd[:2] == ["/opt/tljh/user/bin/python", str(DEPLOY / "course-start")]
    assert config.Spawner.environment["COURSE_DIR"] == str(DEPLOY.parent)
    assert config.Spawner.default_url == "/lab/tree/workspace/00_start_here.ipynb"
    assert not any("allow_root" in a for a in config.Spawner.args)


def test_lab_shuts_a_kernel_down_when_its_notebook_closes() -> None:
    overrides = json.loads((DEPLOY / "overrides.json").read_text())
    assert overrides["@jupyterlab/notebook-extension:tracker"]["kernelShutdown"] is True


def _pod(values: dict) -> object:
    """The learner's pod that KubeSpawner makes from the chart's ``singleuser`` values.

    The mapping is the chart's own (jupyterhub/files/hub/jupyterhub_config.py) for the
    values this recipe sets; a kubeconfig for a cluster that is never contacted lets
    KubeSpawner start.
    """
    from unittest.mock import Mock

    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner

    single = values["singleuser"]

    async def render() -> object:
        user = Mock()
        user.name = user.escaped_name = "ada"
        user.id, user.url, user.settings = 1, "/user/ada/", {}
        spawner = KubeSpawner(_mock=True, user=user, hub=Hub())
        spawner.image = f"{single['image']['name']}:{single['image']['tag']}"
        spawner.mem_guarantee = single["memory"]["guarantee"]
        spawner.mem_limit = single["memory"]["limit"]
        spawner.cpu_guarantee = float(single["cpu"]["guarantee"])
        spawner.cpu_limit = float(single["cpu"]["limit"])
        spawner.lifecycle_hooks = single["lifecycleHooks"]
        spawner.environment = dict(single["extraEnv"])
        spawner.default_url = single["defaultUrl"]
        for name, value in values["hub"]["config"].get("KubeSpawner", {}).items():
            setattr(spawner, name, value)
        return await spawner.get_pod_manifest()

    return asyncio.run(render())


def test_zero_to_jupyterhub_renders_the_learners_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: offline, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: nobody, user: {token: offline}}]\n"
        "contexts: [{name: offline, context: {cluster: offline, user: nobody}}]\n"
        "current-context: offline\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    pytest.importorskip("kubespawner", reason="the hub extra: pip install -e '.[hub]'")
    from kubernetes_asyncio.config import kube_config

    # read when the module is first imported: point it at the offline file
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    values = yaml.safe_load((DEPLOY / "z2jh" / "config.yaml").read_text())
    pod = _pod(values)
    (container,) = pod.spec.containers  # type: ignore[attr-defined]
    resources = container.resources
    assert resources.requests == {"cpu": 0.25, "memory": 512 * 1024**2}
    assert resources.limits == {"cpu": 1.0, "memory": 1024**3}
    assert container.lifecycle.post_start["exec"]["command"] == ["/srv/course/deploy/course-start"]
    env = {e.name: e.value for e in container.env}
    assert env["COURSE_DIR"] == "/srv/course"
    assert env["COURSE_PROGRESS_LOG"] == "/home/jovyan/course-progress.jsonl"
    assert env["KINETO_LOG_LEVEL"] == "6" and env["TORCH_CPP_LOG_LEVEL"] == "ERROR"
    assert env["OMP_NUM_THREADS"] == "1"
    # the image starts in the course's folder (repo2docker's WORKDIR); learners in their home
    assert container.working_dir == "/home/jovyan"
    # the hook builds the workspace, and the image's start script then leaves it out
    assert env["COURSE_START"] == "hook"
    assert '"${COURSE_START:-}" != "hook"' in (REPO / ".binder" / "start").read_text()
    assert "--user-id 1000 --user-name jovyan" in (DEPLOY / "z2jh" / "config.yaml").read_text()
    assert values["cull"]["enabled"] and values["scheduling"]["userScheduler"]["enabled"]
    assert values["singleuser"]["storage"]["homeMountPath"] == "/home/jovyan"


def test_the_instructors_readme_covers_every_file_and_setting() -> None:
    readme = (DEPLOY / "README.md").read_text()
    shipped = {p.name for p in DEPLOY.iterdir() if p.name not in {"README.md", "node_modules"}}
    for name in [*sorted(shipped - {"z2jh"}), "z2jh/config.yaml"]:
        assert f"`{name}`" in readme or f"`{name}`," in readme, name
    config = (DEPLOY / "jupyterhub_config.py").read_text()
    for variable in set(re.findall(r"`(COURSE_[A-Z_]+)`", readme)):
        assert variable in config, variable
    # the scopes the instructor's token needs are the ones tools.progress asks for
    from tools.progress_hub import SCOPES

    assert all(f"`{scope}`" in readme for scope in SCOPES)
    # TLJH's drop-in folder and learner environment, as the config assumes them
    assert (
        "/opt/tljh/config/jupyterhub_config.d/" in readme and "/opt/tljh/user/bin/python" in config
    )
