"""Where WARC files live: one small seam over a local folder and S3-compatible object storage.

The Delta tables go through Spark's Hadoop filesystems (``s3a://`` with hadoop-aws); WARC files
are written by the fetcher and read back by parse in Python, so they need the same reach there.
A location is a URI or a plain path:

* a local path or ``file://…`` -- plain ``os`` functions, exactly as before;
* ``s3a://bucket/key`` or ``s3://bucket/key`` -- fsspec + s3fs (botocore underneath).

S3 has no rename and no append, so :class:`AtomicFile` writes a remote file to a local spool
file (``<name>.open``, in ``$TMPDIR``) and uploads it on :meth:`AtomicFile.commit` (s3fs sends
files of two parts or more -- :attr:`Storage.part_size`, 16 MiB -- as a multipart upload): an
object exists under its final name only when complete, the same promise the local ``.open`` +
rename gives. A crashed task leaves a spool file on the worker, never a partial object. Reads
are ranged GETs (:meth:`Storage.read_range`).

Settings come from the Spark configuration the tables already use (``spark.extra``):
``spark.hadoop.fs.s3a.endpoint``, ``…endpoint.region``, ``…path.style.access``,
``…connection.ssl.enabled`` and, if an operator put them there, ``…access.key`` /
``…secret.key`` / ``…session.token`` (see :meth:`S3Options.from_spark_conf`). Otherwise
credentials come from botocore's default chain -- ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, profiles, instance roles -- as s3a's default
provider chain does. Keys are excluded from ``repr`` and never written anywhere.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

REMOTE_SCHEMES = ("s3a", "s3")
_S3A = "spark.hadoop.fs.s3a."


def scheme(uri: str) -> str:
    """The URI scheme in lower case; ``""`` for a plain path."""
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else ""


def is_remote(uri: str) -> bool:
    """True for object-store URIs (``s3a://``, ``s3://``)."""
    return scheme(uri) in REMOTE_SCHEMES


def local_path(uri: str) -> str:
    """A local path for a plain path or ``file://`` URI."""
    if scheme(uri) == "file":
        return uri[len("file://"):]
    if scheme(uri):
        raise ValueError(f"not a local path: {uri}")
    return uri


def join(base: str, name: str) -> str:
    """``base/name`` for paths and URIs alike."""
    return base.rstrip("/") + "/" + name if is_remote(base) else os.path.join(base, name)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class S3Options:
    """How Python reaches the bucket; built from the same settings as Spark's s3a."""

    endpoint_url: str | None = None
    region: str | None = None
    path_style: bool = False
    key: str | None = field(default=None, repr=False)
    secret: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)

    @classmethod
    def from_spark_conf(cls, conf: Mapping[str, Any]) -> S3Options:
        """Translate ``spark.hadoop.fs.s3a.*`` settings (global ones; per-bucket
        ``fs.s3a.bucket.<name>.*`` overrides are not read)."""

        def get(name: str) -> str | None:
            value = conf.get(_S3A + name)
            return None if value is None or str(value) == "" else str(value)

        endpoint = get("endpoint")
        if endpoint and "://" not in endpoint:
            ssl = get("connection.ssl.enabled")
            endpoint = ("http://" if ssl is not None and not _truthy(ssl) else "https://") + endpoint
        return cls(
            endpoint_url=endpoint,
            region=get("endpoint.region") or get("region"),
            path_style=_truthy(get("path.style.access") or "false"),
            key=get("access.key"),
            secret=get("secret.key"),
            token=get("session.token"),
        )

    def s3fs_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        client: dict[str, Any] = {}
        if self.endpoint_url:
            kw["endpoint_url"] = self.endpoint_url
        if self.region:
            client["region_name"] = self.region
        elif self.endpoint_url:
            client["region_name"] = "us-east-1"  # S3-compatible servers mostly ignore it
        if client:
            kw["client_kwargs"] = client
        if self.path_style:
            kw["config_kwargs"] = {"s3": {"addressing_style": "path"}}
        if self.key and self.secret:
            kw.update(key=self.key, secret=self.secret)
            if self.token:
                kw["token"] = self.token
        return kw


class Storage:
    """File operations by URI. Cheap to build; the S3 client is created on first use."""

    #: Multipart part size for uploads (S3's minimum is 5 MiB); s3fs uploads a file smaller
    #: than two parts in one PUT, read into memory whole.
    part_size = 16 * 1024 * 1024

    def __init__(self, s3: S3Options | None = None) -> None:
        self.s3 = s3 or S3Options()
        self._fs = None

    def _s3fs(self):
        if self._fs is None:
            import s3fs  # lazy: heavy (s3fs, botocore), for s3a:// paths only

            self._fs = s3fs.S3FileSystem(**self.s3.s3fs_kwargs())
        return self._fs

    @staticmethod
    def _key(uri: str) -> str:
        return uri.split("://", 1)[1]

    # -- reading -------------------------------------------------------------------------------
    def open_read(self, uri: str) -> BinaryIO:
        """A seekable binary file (on S3: ranged reads with a read-ahead block)."""
        if is_remote(uri):
            return self._s3fs().open(self._key(uri), "rb", block_size=1 << 20)
        return open(local_path(uri), "rb")  # noqa: SIM115 - the caller closes it

    def read_range(self, uri: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer at the end of the file)."""
        if is_remote(uri):
            return self._s3fs().cat_file(self._key(uri), start=offset, end=offset + length)
        with open(local_path(uri), "rb") as fh:
            fh.seek(offset)
            return fh.read(length)

    # -- listing and deleting ------------------------------------------------------------------
    def exists(self, uri: str) -> bool:
        if is_remote(uri):
            return self._s3fs().exists(self._key(uri))
        return os.path.exists(local_path(uri))

    def listdir(self, uri: str) -> list[str]:
        """Files directly under a folder, as full URIs / paths; empty if it does not exist."""
        if is_remote(uri):
            fs = self._s3fs()
            prefix = self._key(uri).rstrip("/")
            try:
                entries = fs.ls(prefix, detail=True, refresh=True)
            except FileNotFoundError:
                return []
            head = scheme(uri)
            return sorted(f"{head}://{e['name']}" for e in entries if e.get("type") == "file")
        path = local_path(uri)
        if not os.path.isdir(path):
            return []
        return sorted(os.path.join(path, n) for n in os.listdir(path)
                      if os.path.isfile(os.path.join(path, n)))

    def delete(self, uri: str) -> None:
        """Remove a file; a missing one is not an error."""
        if is_remote(uri):
            fs = self._s3fs()
            try:
                fs.rm_file(self._key(uri))
            except FileNotFoundError:
                pass
            return
        try:
            os.remove(local_path(uri))
        except FileNotFoundError:
            pass

    # -- writing -------------------------------------------------------------------------------
    def create(self, uri: str) -> AtomicFile:
        """A new file that appears under ``uri`` only once :meth:`AtomicFile.commit` ran."""
        return AtomicFile(self, uri)

    def _upload(self, local: str, uri: str) -> None:
        self._s3fs().put_file(local, self._key(uri), chunksize=self.part_size)


class AtomicFile:
    """Write-then-publish. Local: ``<path>.open``, fsync, atomic rename. S3: a local spool
    file, uploaded (multipart when large) on commit and removed; nothing is visible before."""

    def __init__(self, storage: Storage, uri: str) -> None:
        self.storage = storage
        self.uri = uri
        self.remote = is_remote(uri)
        if self.remote:
            name = uri.rstrip("/").rsplit("/", 1)[-1]
            fd, self._spool = tempfile.mkstemp(prefix="recrawl-", suffix=f"-{name}.open")
            self._fh = os.fdopen(fd, "wb")
        else:
            path = local_path(uri)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self._spool = path + ".open"
            self._fh = open(self._spool, "wb")  # noqa: SIM115 - closed in commit/abort

    def write(self, data: bytes) -> int:
        return self._fh.write(data)

    def tell(self) -> int:
        return self._fh.tell()

    def commit(self) -> str:
        """Make the file visible under its final name; returns that name."""
        self._fh.flush()
        if self.remote:
            self._fh.close()
            try:
                self.storage._upload(self._spool, self.uri)
            finally:
                os.remove(self._spool)
        else:
            os.fsync(self._fh.fileno())
            self._fh.close()
            os.replace(self._spool, local_path(self.uri))
        return self.uri

    def abort(self) -> None:
        """Drop what was written (the local ``.open`` file or the spool file)."""
        self._fh.close()
        try:
            os.remove(self._spool)
        except FileNotFoundError:
            pass
