"""Shared fixtures: one Spark session for the whole run (a JVM start costs ~5 s)."""

from __future__ import annotations

import pytest

from recrawl.config import load_config


def make_config(home, **overrides):
    """A Config whose crawl home is `home`, with dotted-key overrides."""
    cfg = load_config(environ={})
    values = {"crawl.home": str(home), "spark.shuffle_partitions": 2}
    values.update(overrides)
    return cfg.with_overrides(values, "test")


@pytest.fixture(scope="session")
def spark():
    from recrawl.spark import get_spark

    cfg = load_config(environ={}).with_overrides({"spark.shuffle_partitions": 2})
    session = get_spark(cfg, app_name="recrawl-tests")
    yield session
    session.stop()


@pytest.fixture()
def cfg(tmp_path):
    return make_config(tmp_path / "home")
