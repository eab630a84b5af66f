"""Configuration: one documented defaults file, an optional user file, environment overrides.

Precedence is defaults.toml < user file (--config / $RECRAWL_CONFIG) < environment
(RECRAWL_<SECTION>__<KEY>) < explicit overrides from the command line. Unknown sections or
keys and values of the wrong type are refused with a message naming the key, so a typo never
silently falls back to a default. The result is a frozen object passed to every job.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

ENV_PREFIX = "RECRAWL_"
# The checkout or install root: relative jar, archive and var/ paths are resolved against it.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def local_path(location: str) -> Path | None:
    """The local folder a location names (a plain path, file:/... or file:///...); None for a
    remote store (s3a://, hdfs://, ...), which only a JVM or an object-store client can read."""
    if location.startswith("file:"):
        rest = location[len("file:"):]
        return Path(rest[2:] if rest.startswith("//") else rest)
    if "://" in location:
        return None
    return Path(location).expanduser()


class ConfigError(ValueError):
    """A configuration problem a person can fix; the message says which key and how."""


def _defaults() -> dict[str, dict[str, Any]]:
    # Through importlib.resources: also readable when recrawl is imported from the code zip
    # that a cluster driver ships with spark.submit.pyFiles (recrawl/sparkenv/cluster.py).
    # lazy: keeps `crawler --help` fast (importlib.resources loads tempfile, bz2, lzma: ~3 ms)
    from importlib.resources import files

    text = files("recrawl").joinpath("defaults.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def default(key: str) -> Any:
    """defaults.toml's value of `section.key`: for callers without a crawl's configuration
    (an analyst's function called bare), so that no module repeats a default."""
    section, _, name = key.partition(".")
    try:
        return _defaults()[section][name]
    except KeyError:
        raise ConfigError(f"unknown setting {key!r}") from None


def _coerce(section: str, key: str, default: Any, value: Any, origin: str) -> Any:
    """Check `value` against the default's type; ints are accepted where floats are."""
    name = f"{section}.{key}"
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
    elif isinstance(default, list):
        if isinstance(value, list):
            return tuple(value)
    elif isinstance(default, dict):
        if isinstance(value, dict):
            return MappingProxyType(dict(value))
    raise ConfigError(
        f"{origin}: {name} must be {type(default).__name__}, got {value!r}"
    )


def parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


# Keys that moved: the old spelling is refused with the new one named, not silently ignored.
MOVED_KEYS = {("schedule", "trivial_change_distance"): "updatedb.trivial_change_distance"}


def _merge(
    base: dict[str, dict[str, Any]],
    defaults: dict[str, dict[str, Any]],
    layer: Mapping[str, Any],
    origin: str,
) -> None:
    for section, values in layer.items():
        if section not in defaults:
            raise ConfigError(
                f"{origin}: unknown section [{section}]; known: {', '.join(sorted(defaults))}"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"{origin}: [{section}] must be a table of keys")
        for key, value in values.items():
            if (section, key) in MOVED_KEYS:
                raise ConfigError(f"{origin}: {section}.{key} is now "
                                  f"{MOVED_KEYS[(section, key)]}: set that instead")
            if key not in defaults[section]:
                raise ConfigError(
                    f"{origin}: unknown key {section}.{key}; known in [{section}]: "
                    f"{', '.join(sorted(defaults[section]))}"
                )
            base[section][key] = _coerce(section, key, defaults[section][key], value, origin)


def _env_layer(environ: Mapping[str, str], defaults: dict[str, dict[str, Any]]) -> dict:
    layer: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name == "RECRAWL_CONFIG":
            continue
        rest = name[len(ENV_PREFIX):]
        if "__" not in rest:
            raise ConfigError(
                f"environment {name}: expected RECRAWL_<SECTION>__<KEY>, e.g. RECRAWL_CRAWL__HOME"
            )
        section, key = rest.split("__", 1)
        layer.setdefault(section.lower(), {})[key.lower()] = parse_value(raw)
    return layer


@dataclass(frozen=True)
class Config:
    """Frozen, validated configuration; sections are read-only mappings."""

    values: Mapping[str, Mapping[str, Any]]
    source: str = "defaults"

    def section(self, name: str) -> Mapping[str, Any]:
        return self.values[name]

    def get(self, dotted: str) -> Any:
        section, key = dotted.split(".", 1)
        try:
            return self.values[section][key]
        except KeyError:
            raise ConfigError(f"unknown configuration key {dotted}") from None

    # Paths derived from crawl.home: kept here so every job agrees on the layout.
    @property
    def home(self) -> str:
        home = self.values["crawl"]["home"]
        if "://" in home:
            return home.rstrip("/")
        return str(Path(home).expanduser().resolve())

    @property
    def local_home(self) -> Path | None:
        """The crawl home as a local folder; None when it is on object storage."""
        return local_path(self.home)

    def table_path(self, table: str) -> str:
        return f"{self.home}/tables/{table}"

    def warc_dir(self, round_id: str) -> str:
        return f"{self.home}/warc/{round_id}"

    def with_overrides(self, overrides: Mapping[str, Any], origin: str = "override") -> Config:
        """A copy with dotted-key overrides (CLI flags), validated like any other layer."""
        layer: dict[str, dict[str, Any]] = {}
        for dotted, value in overrides.items():
            if "." not in dotted:
                raise ConfigError(f"{origin}: expected section.key, got {dotted!r}")
            section, key = dotted.split(".", 1)
            layer.setdefault(section, {})[key] = value
        defaults = _defaults()
        merged = {s: dict(v) for s, v in self.values.items()}
        _merge(merged, defaults, layer, origin)
        return Config(_freeze(merged), self.source + f" + {origin}")


def _freeze(values: dict[str, dict[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return MappingProxyType({s: MappingProxyType(dict(v)) for s, v in values.items()})


def load_config(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load defaults, then the user file (argument or $RECRAWL_CONFIG), then the environment."""
    environ = os.environ if environ is None else environ
    defaults = _defaults()
    merged: dict[str, dict[str, Any]] = {}
    for section, values in defaults.items():
        merged[section] = {
            k: _coerce(section, k, v, v, "defaults.toml") for k, v in values.items()
        }
    sources = ["defaults"]
    path = path or environ.get("RECRAWL_CONFIG")
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} not found (from --config or RECRAWL_CONFIG)")
        try:
            layer = tomllib.loads(p.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: not valid TOML: {exc}") from None
        _merge(merged, defaults, layer, str(p))
        sources.append(str(p))
    env_layer = _env_layer(environ, defaults)
    if env_layer:
        _merge(merged, defaults, env_layer, "environment")
        sources.append("environment")
    return Config(_freeze(merged), " + ".join(sources))
