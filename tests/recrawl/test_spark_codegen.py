"""Spark's code generation follows `spark.codegen`: off for a small crawldb under "auto"."""

from __future__ import annotations

import pytest

from recrawl.config import ConfigError
from recrawl.sparkenv.spark import codegen_mode, set_codegen
from tests.conftest import make_config

WHOLE_STAGE = "spark.sql.codegen.wholeStage"
FACTORY = "spark.sql.codegen.factoryMode"


@pytest.fixture()
def session(spark, tmp_path):
    yield spark
    set_codegen(spark, make_config(tmp_path / "none"))  # back to the suite's setting (no crawldb)


def _crawldb_of(home, size: int) -> None:
    folder = home / "tables" / "crawldb"
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"\0" * size)


def _compiles(spark) -> bool:
    return spark.conf.get(WHOLE_STAGE) == "true" and spark.conf.get(FACTORY) != "NO_CODEGEN"


def test_auto_is_off_without_a_crawldb_and_for_a_small_one(session, tmp_path):
    assert set_codegen(session, make_config(tmp_path / "empty")) is False
    assert not _compiles(session)
    _crawldb_of(tmp_path / "small", 512 * 1024)
    assert set_codegen(session, make_config(tmp_path / "small", **{"spark.codegen_min_mb": 1})) is False
    assert session.conf.get(WHOLE_STAGE) == "false"
    assert session.conf.get(FACTORY) == "NO_CODEGEN"


def test_auto_is_on_once_the_crawldb_reaches_the_threshold(session, tmp_path):
    set_codegen(session, make_config(tmp_path / "empty"))
    _crawldb_of(tmp_path / "big", 2 * 1024 * 1024)
    assert set_codegen(session, make_config(tmp_path / "big", **{"spark.codegen_min_mb": 1})) is True
    assert _compiles(session)


def test_on_and_off_force_it(session, tmp_path):
    assert set_codegen(session, make_config(tmp_path / "x", **{"spark.codegen": "on"})) is True
    assert _compiles(session)
    _crawldb_of(tmp_path / "big", 2 * 1024 * 1024)
    cfg = make_config(tmp_path / "big", **{"spark.codegen": "off", "spark.codegen_min_mb": 1})
    assert set_codegen(session, cfg) is False
    assert not _compiles(session)


def test_a_query_gives_the_same_answer_either_way(session, tmp_path):
    query = ("SELECT id % 7 AS k, count(*) AS n, sum(id * 2) AS s, max(concat('u', id)) AS m "
             "FROM range(0, 5000) GROUP BY id % 7 ORDER BY k")
    set_codegen(session, make_config(tmp_path / "x", **{"spark.codegen": "off"}))
    interpreted = [tuple(r) for r in session.sql(query).collect()]
    set_codegen(session, make_config(tmp_path / "x", **{"spark.codegen": "on"}))
    assert [tuple(r) for r in session.sql(query).collect()] == interpreted


@pytest.mark.parametrize("overrides", [{"spark.codegen": "sometimes"}, {"spark.codegen_min_mb": -1}])
def test_bad_settings_are_refused_before_a_jvm_starts(tmp_path, overrides):
    with pytest.raises(ConfigError, match="spark.codegen"):
        codegen_mode(make_config(tmp_path, **overrides))
