"""The real-page parse benchmark's measurements on a small page of its own (no download): one
row per page with every figure the summary reads, and an independent link reading."""

from __future__ import annotations

from benchmarks.real_pages import Page, lxml_targets, measure, summary

HTML = """<html lang="de"><head><title>Stadtrat</title><base href="https://news.example/a/">
</head><body><nav><a href="/">Start</a> <a href="b.html">B</a> <a href="b.html#top">B</a>
<a rel="nofollow" href="/login">Login</a> <a href="mailto:x@example.com">Mail</a></nav>
<article>""" + "".join(
    f"<p>Der Stadtrat hat den Haushalt für das kommende Jahr beschlossen, Absatz {i}, nach "
    "einer langen Debatte über Schulen, Straßen und die neue Bibliothek am Fluss.</p>"
    for i in range(6)) + "</article></body></html>"


def test_lxml_reading_resolves_against_base_and_leaves_out_nofollow_and_non_http():
    assert lxml_targets(HTML, "https://news.example/x") == {
        "https://news.example/", "https://news.example/a/b.html"}


def test_a_page_gives_every_figure_the_summary_reads(capsys):
    page = Page("tiny", HTML.encode(), "https://news.example/x", reference=HTML)
    row = measure(page, reps=1)
    assert row["charset"] == "utf-8" and row["lang"] == "de"
    assert (row["found"], row["lxml"]) == (2, 2)
    assert row["label_resiliparse"] == "resiliparse" and row["jaccard_trafilatura"] == 1.0
    assert row["same_unstripped"] and not row["limited_error"]
    summary([row])
    out = capsys.readouterr().out
    assert "parse_html, parse.extractor = resiliparse" in out and "2 of lxml's 2" in out
