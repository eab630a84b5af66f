"""inject's seed file reading, without Spark (the MERGE: test_round_e2e.py's inject test)."""

import pytest

from recrawl.content.urlnorm import DEFAULT_RULES
from recrawl.rules.rounds import BadInput
from spark_jobs.inject import check_seeds, read_seeds


def test_read_seeds_reports_line_numbers_and_dedupes(tmp_path):
    f = tmp_path / "seeds.txt"
    f.write_bytes(
        b"# comment\n\nhttp://Example.com:80/a/../b#x\nhttp://example.com/b\n"
        b"ftp://x/\n   \njavascript:alert(1)\nhttps://b.test/\tnutch.score=1\n\xff\xfe\n"
    )
    seeds = read_seeds(f, DEFAULT_RULES)
    assert seeds.urls == ["http://example.com/b", "https://b.test/"]
    assert [(n, reason.split()[0]) for n, _, reason in seeds.invalid] == [
        (5, "unsupported"), (7, "unsupported"), (9, "not"),
    ]
    assert seeds.lines == 9


def test_read_seeds_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(BadInput, match="not found"):
        read_seeds(tmp_path / "nope.txt", DEFAULT_RULES)


def test_a_file_without_one_valid_url_is_refused_as_the_wrong_file(tmp_path):
    f = tmp_path / "urls.csv"
    f.write_text("id,url\n1,example\n")
    seeds = read_seeds(f, DEFAULT_RULES)
    assert seeds.urls == [] and len(seeds.invalid) == 2
    with pytest.raises(BadInput, match="no valid URL"):
        check_seeds(seeds, f)
    ok = tmp_path / "seeds.txt"
    ok.write_text("not a url\nhttp://a.test/\n")
    check_seeds(read_seeds(ok, DEFAULT_RULES), ok)  # one valid line is enough
