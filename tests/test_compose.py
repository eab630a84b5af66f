"""docker-compose.yml is a valid Compose file, complete, pinned, and free of secrets.

No Docker engine runs here: the compose client validates and resolves the file (`config -q`),
which catches schema errors, bad interpolation and missing required variables without building
or pulling anything. Uses the compose v2 plugin (`docker compose`) when present, else Debian's
`docker-compose` (scripts/test.sh installs it where the plugin is missing).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / "docker" / "env.example"
SERVICES = {
    "postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
    "airflow-triggerer", "spark-master", "spark-worker-1", "spark-worker-2", "minio", "minio-init",
    "jupyter",
}


def _compose() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 timeout=60).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    if docker is None and not os.environ.get("CI"):
        pytest.skip("docker client not installed")
    if os.environ.get("CI"):
        pytest.fail("no compose client: scripts/test.sh installs Debian's docker-compose")
    pytest.skip("docker is installed without the compose plugin: apt-get install docker-compose")


def _run(args, env_file: Path):
    # Only the variables of the env file: the caller's environment must not fill gaps.
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME", "LANG", "LC_ALL", "DOCKER_CONFIG", "TMPDIR")}
    return subprocess.run([*_compose(), "-f", str(COMPOSE), "--env-file", str(env_file), *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


@pytest.fixture(scope="module")
def resolved(tmp_path_factory):
    out = _run(["config", "-q"], ENV_EXAMPLE)
    assert out.returncode == 0, out.stderr
    full = _run(["config"], ENV_EXAMPLE)
    assert full.returncode == 0, full.stderr
    import yaml

    return yaml.safe_load(full.stdout)


def test_compose_file_is_valid_and_has_every_service(resolved):
    assert set(resolved["services"]) == SERVICES


def test_images_are_pinned(resolved):
    for name, svc in resolved["services"].items():
        image = svc["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and "/" not in tag, (name, image)
    text = COMPOSE.read_text() + (ROOT / "docker" / "Dockerfile").read_text()
    for base in re.findall(r"^ARG \w+_IMAGE=(\S+)$", text, flags=re.M):
        assert re.search(r":\d", base), base


def test_crawler_configuration_comes_from_the_environment(resolved):
    from recrawl.config import load_config

    for name in ("airflow-scheduler", "jupyter"):
        env = resolved["services"][name]["environment"]
        assert env["RECRAWL_CRAWL__HOME"].startswith("s3a://")
        assert env["RECRAWL_SPARK__MASTER"] == "spark://spark-master:7077"
        cfg = load_config(environ={k: str(v) for k, v in env.items() if k.startswith("RECRAWL_")})
        extra = cfg.get("spark.extra")
        assert extra["spark.hadoop.fs.s3a.endpoint"] == "http://minio:9000"
        assert not any("key" in k.lower() or "secret" in k.lower() for k in extra), extra
        # every container has the same /opt/recrawl/.venv: no environment archive (docs/cluster.md)
        assert cfg.get("spark.python_archive") == ""
    assert resolved["services"]["airflow-scheduler"]["environment"]["AIRFLOW__CORE__EXECUTOR"] == \
        "LocalExecutor"
    assert "postgresql" in resolved["services"]["airflow-apiserver"]["environment"][
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]


def test_no_secret_is_written_in_the_compose_file():
    """Secrets appear only as references: `KEY: ${KEY...}`, `${KEY}`, `$${KEY}`, `environ["KEY"]`."""
    secrets = [line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text().splitlines()
               if "=" in line and not line.startswith("#") and "change-me" in line]
    assert len(secrets) >= 8
    text = COMPOSE.read_text()
    assert "change-me" not in text
    for line in text.splitlines():
        line = re.sub(r":\?[^}]*}", "}", line)  # drop the "set X in .env" error messages
        for key in secrets:
            m = re.match(rf"\s*{key}:\s*(.*)$", line)
            if m:
                assert m.group(1).startswith("${"), line
                continue
            for hit in re.finditer(rf"(?<![A-Z_]){key}(?![A-Z_])", line):
                assert line[:hit.start()].endswith(("${", "$${", "environ[\"")), line


def test_missing_secret_stops_compose(tmp_path):
    env = tmp_path / "partial.env"
    env.write_text("\n".join(line for line in ENV_EXAMPLE.read_text().splitlines()
                             if not line.startswith("POSTGRES_PASSWORD=")) + "\n")
    out = _run(["config", "-q"], env)
    assert out.returncode != 0
    assert "POSTGRES_PASSWORD" in out.stderr
