import pytest

from recrawl.config import ConfigError, load_config


def test_defaults_load_and_every_key_is_documented():
    cfg = load_config(environ={})
    assert cfg.get("fetcher.min_delay_s") == 1.0
    assert cfg.get("spark.master") == "local[*]"
    text = open(load_config.__code__.co_filename.replace("config.py", "defaults.toml")).read()
    lines = text.splitlines()
    # every key line is preceded by a comment line or another key of the same documented group
    for i, line in enumerate(lines):
        if "=" in line and not line.startswith("#") and not line.startswith("["):
            j = i - 1
            while j >= 0 and "=" in lines[j] and not lines[j].startswith("#"):
                j -= 1
            assert lines[j].startswith("#") or lines[j].startswith("["), line


def test_environment_overrides_parse_types():
    env = {
        "RECRAWL_FETCHER__MIN_DELAY_S": "2.5",
        "RECRAWL_CRAWL__HOME": "s3a://bucket/crawl",
        "RECRAWL_FETCHER__STATIC_HOSTS": '{"*.sim.test" = "127.0.0.1"}',
        "RECRAWL_FETCHER__PER_IP": "true",
    }
    cfg = load_config(environ=env)
    assert cfg.get("fetcher.min_delay_s") == 2.5
    assert cfg.home == "s3a://bucket/crawl"
    assert cfg.get("fetcher.static_hosts")["*.sim.test"] == "127.0.0.1"
    assert cfg.get("fetcher.per_ip") is True
    assert "environment" in cfg.source


def test_unknown_key_is_refused_with_its_name():
    with pytest.raises(ConfigError, match="unknown key fetcher.min_delai_s"):
        load_config(environ={"RECRAWL_FETCHER__MIN_DELAI_S": "2"})
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(environ={"RECRAWL_FETCH__MIN_DELAY_S": "2"})


def test_a_moved_key_is_refused_with_its_new_name(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[schedule]\ntrivial_change_distance = 5\n")
    with pytest.raises(ConfigError, match="is now updatedb.trivial_change_distance"):
        load_config(f, environ={})
    f.write_text("[updatedb]\ntrivial_change_distance = 5\n")
    assert load_config(f, environ={}).get("updatedb.trivial_change_distance") == 5


def test_wrong_type_is_refused(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[fetcher]\nmin_delay_s = "fast"\n')
    with pytest.raises(ConfigError, match="fetcher.min_delay_s must be float"):
        load_config(f, environ={})


def test_file_then_environment_precedence(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[generate]\ntop_n = 50\nmax_per_host = 7\n")
    cfg = load_config(f, environ={"RECRAWL_GENERATE__TOP_N": "60"})
    assert cfg.get("generate.top_n") == 60
    assert cfg.get("generate.max_per_host") == 7


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml", environ={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[crawl\nhome=1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad, environ={})


def test_config_is_frozen():
    cfg = load_config(environ={})
    with pytest.raises(TypeError):
        cfg.section("crawl")["home"] = "x"  # type: ignore[index]


def test_overrides_validate():
    cfg = load_config(environ={}).with_overrides({"generate.top_n": 5})
    assert cfg.get("generate.top_n") == 5
    with pytest.raises(ConfigError):
        cfg.with_overrides({"generate.top_m": 5})


def test_local_path_names_the_folder_of_plain_and_file_locations_only(tmp_path):
    from pathlib import Path

    from recrawl.config import local_path

    assert local_path("/data/crawl") == Path("/data/crawl")
    assert local_path("file:///data/crawl") == Path("/data/crawl")
    assert local_path("file:/data/crawl") == Path("/data/crawl")
    assert local_path("~/crawl") == Path.home() / "crawl"
    for remote in ("s3a://bucket/crawl", "hdfs://nn:8020/crawl", "s3://b/c"):
        assert local_path(remote) is None
    # the crawl home: one property, used by the lock, the SQL fast path, the JIT choice, replay
    assert load_config(environ={"RECRAWL_CRAWL__HOME": str(tmp_path)}).local_home == tmp_path
    assert load_config(environ={"RECRAWL_CRAWL__HOME": "s3a://b/crawl"}).local_home is None
