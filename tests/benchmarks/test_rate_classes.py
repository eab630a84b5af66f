"""The pipeline benchmark's per-class view: each page goes to its simweb rate class, and the
medians are over the pages that have a value."""

from __future__ import annotations

from benchmarks.pipeline_freshness import PolicyRun, by_rate_class, class_lines, rate_class


def test_pages_go_to_the_nearest_class_in_log_space():
    assert rate_class(0.0031) == 0.003 and rate_class(0.0001) == 0.003
    assert rate_class(1 / 30 * 1.3) == 1 / 30 and rate_class(1.4) == 1.0
    assert rate_class(40.0) == 5.0 and rate_class(0.0) == 0.003


def test_medians_per_class_skip_missing_estimates_and_intervals():
    rows = [(0.003, 0.05, 30.0), (0.0028, None, 30.0), (0.0035, 0.01, None),
            (1.1, 0.9, 1.0), (0.95, 1.4, 2.0)]
    got = by_rate_class(rows)
    assert [c["class"] for c in got] == [0.003, 1.0]
    assert got[0]["pages"] == 3 and got[0]["true"] == 0.003
    assert got[0]["estimated"] == (0.01 + 0.05) / 2 and got[0]["interval_d"] == 30.0
    assert got[1] == {"class": 1.0, "pages": 2, "true": (0.95 + 1.1) / 2,
                      "estimated": (0.9 + 1.4) / 2, "interval_d": 1.5}
    lines = class_lines(PolicyRun("optimal", [], 0.0, 0, 0.0, got))
    assert len(lines) == 2 and "revisit every 30.0 d" in lines[0]
    assert by_rate_class([]) == []
