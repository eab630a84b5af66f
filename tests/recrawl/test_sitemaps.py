import gzip

from recrawl.content.sitemaps import is_sitemap, sitemap_locs

SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>http://a.test/p/1.html</loc><lastmod>2026-01-01</lastmod></url>
<url><loc> http://a.test/q?x=1&amp;y=2 </loc></url>
</urlset>"""


def test_recognises_and_lists_locs():
    assert is_sitemap(SITEMAP, "application/xml")
    assert sitemap_locs(SITEMAP) == ["http://a.test/p/1.html", "http://a.test/q?x=1&y=2"]


def test_gzip_and_index():
    idx = b'<sitemapindex xmlns="x"><sitemap><loc>http://a.test/s1.xml</loc></sitemap></sitemapindex>'
    assert is_sitemap(gzip.compress(idx), "application/x-gzip")
    assert sitemap_locs(gzip.compress(idx)) == ["http://a.test/s1.xml"]


def test_html_is_not_a_sitemap_and_limit_applies():
    assert not is_sitemap(b"<html><body><loc>x</loc></body></html>", "text/html")
    many = b"<urlset>" + b"".join(b"<url><loc>http://a.test/%d</loc></url>" % i for i in range(50)) + b"</urlset>"
    assert len(sitemap_locs(many, limit=10)) == 10
    assert sitemap_locs(b"\x1f\x8bgarbage") == []
