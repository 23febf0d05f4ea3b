"""A TOML config file as read before any settings model checks it: its tables, with relative
paths resolved against the file's folder; which file applies; and the environment variables
that set settings. No model is built here, so a command that needs a setting or two
(``groundjudge metrics`` on TREC files: :mod:`groundjudge.trec_config`) reads them without the
settings models of :mod:`groundjudge.config`, which builds on what is here.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from groundjudge.errors import InputError

# the config read when no --config is given, if the working directory holds one
DEFAULT_CONFIG = Path("groundjudge.toml")

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)  # [metrics] ks unless set

# GROUNDJUDGE_* environment variables and the setting each one sets
ENVIRONMENT = {
    "GROUNDJUDGE_BASE_URL": ("judge", "base_url"),
    "GROUNDJUDGE_MODEL": ("judge", "model"),
    "GROUNDJUDGE_CONCURRENCY": ("judge", "concurrency"),
    "GROUNDJUDGE_CACHE_DIR": ("cache", "dir"),
    "GROUNDJUDGE_MODELS_DIR": ("local", "models_dir"),
    "GROUNDJUDGE_LOCAL_THREADS": ("local", "threads"),
}


def config_file(path: str | Path | None) -> Path | None:
    """The config file that applies: ``path``; with ``None``, ``groundjudge.toml`` in the working
    directory if there is one, else None (the defaults)."""
    if path is None:
        return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None
    return Path(path)


def environment_settings(environ: Mapping[str, str]) -> dict[tuple[str, str], str]:
    """The settings the environment sets: (section, name) -> value, for each variable of
    :data:`ENVIRONMENT` that is set and not empty."""
    return {setting: environ[var] for var, setting in ENVIRONMENT.items() if environ.get(var)}


def read_config_file(path: Path, path_fields: Collection[tuple[str, str]]) -> dict[str, Any]:
    """The tables of the TOML file ``path``, with each relative path among ``path_fields``
    (section, name) made absolute against the file's folder. An :class:`InputError` when the
    file cannot be read or is no TOML."""
    import tomllib  # (here: a command given no config file does not pay for importing it)

    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError.one(path, None, None, "config file not found") from None
    except IsADirectoryError:
        raise InputError.one(path, None, None, "is a folder, expected a TOML config file") from None
    except RecursionError:
        raise InputError.one(path, None, None, "nested too deeply to read") from None
    except UnicodeDecodeError:
        raise InputError.one(path, None, None, "config file is not valid UTF-8") from None
    except OSError as exc:
        raise InputError.one(path, None, None, f"cannot read the config file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError.one(path, getattr(exc, "lineno", None), None, f"invalid TOML: {exc}") from None
    base = path.resolve().parent
    for section, name in path_fields:
        if isinstance(raw.get(section), dict) and name in raw[section]:
            raw[section][name] = _resolve(base, raw[section][name])
    return raw


def _resolve(base: Path, value: Any) -> Any:
    if isinstance(value, str):
        return os.path.normpath(base / value) if not Path(value).is_absolute() else value
    if isinstance(value, list):
        return [_resolve(base, v) for v in value]
    return value
