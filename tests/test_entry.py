"""The command's entry point: the plain quiet TREC call runs without the command-line library,
with the very files, output and exit code of the CLI; every other call goes to the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from groundjudge.entry import quiet_trec_call

ROOT = Path(__file__).resolve().parent.parent
ROBUST = (ROOT / ".." / "shared" / "data" / "trec" / "trectools_robust03").resolve()
QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n"
RUN = "1 Q0 d1 1 2.5 t\n1 Q0 d9 2 1.5 t\n2 Q0 d3 1 0.5 t\n"


def _files(tmp_path: Path) -> tuple[Path, Path]:
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text(QRELS, encoding="utf-8")
    run.write_text(RUN, encoding="utf-8")
    return qrels, run


@pytest.mark.parametrize("args", [
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o", "--quiet"],
    ["metrics", "--quiet", "--out", "o", "--k", "5", "--run", "r", "--k", "2", "--qrels", "q"],
])
def test_the_plain_quiet_trec_call_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    call = quiet_trec_call(args)
    assert call is not None and call.qrels == Path("q") and call.run == Path("r") and call.out == Path("o")
    assert call.ks == ((2, 5) if "--k" in args else (1, 3, 5, 10))


@pytest.mark.parametrize("args", [
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o"],  # not quiet: the CLI prints the summary
    ["metrics", "--qrels", "q", "--run", "r", "--quiet"],  # no folder named
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o", "--quiet", "--k", "0"],
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o", "--quiet", "--k", "05"],
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o", "--quiet", "--k", "²"],
    ["metrics", "--qrels", "q", "--qrels", "q2", "--run", "r", "--out", "o", "--quiet"],
    ["metrics", "--qrels=q", "--run", "r", "--out", "o", "--quiet"],
    ["metrics", "--qrels", "-q", "--run", "r", "--out", "o", "--quiet"],
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o", "--quiet", "--golden", "g"],
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o", "--quiet", "--help"],
    ["metrics", "--qrels", "q", "--run", "r", "--out", "o", "--quiet", "--out"],
    ["run", "--qrels", "q", "--run", "r", "--out", "o", "--quiet"],
])
def test_any_other_call_goes_to_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert quiet_trec_call(args) is None


def _run(how: str, args: list[str], cwd: Path) -> tuple[int, str, str, dict[str, bytes], bool]:
    """The command run in a fresh process through the entry point or straight through the CLI:
    its exit code, stdout, stderr, the files of ``cwd/out``, and whether click was imported."""
    main = "groundjudge.entry" if how == "entry" else "groundjudge.cli"
    code = (f"import sys; sys.argv = ['groundjudge', *{args!r}]\nfrom {main} import main\n"
            "try:\n    main()\nfinally:\n    print('click' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")})
    *stderr, clicked = done.stderr.splitlines() or ["", "?"]
    out = cwd / "out"
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir())} if out.is_dir() else {}
    return done.returncode, done.stdout, "\n".join(stderr), files, clicked == "True"


@pytest.mark.parametrize("case", ["good", "missing run", "bad line", "out is a file", "missing config"])
def test_the_quick_call_writes_and_fails_as_the_cli_does(tmp_path: Path, case: str) -> None:
    qrels, run = _files(tmp_path)
    if case == "missing run":
        run = tmp_path / "nowhere.txt"
    elif case == "bad line":
        run.write_text("1 Q0 d1 1 x t\n", encoding="utf-8")
    elif case == "out is a file":
        (tmp_path / "out").write_text("not a folder", encoding="utf-8")
    args = ["metrics", "--qrels", str(qrels), "--run", str(run), "--out", "out", "--quiet", "--k", "2",
            *(["--config", "nowhere.toml"] if case == "missing config" else [])]
    seen = []
    for how in ("cli", "entry"):
        if (tmp_path / "out").is_dir():
            for path in (tmp_path / "out").iterdir():
                path.unlink()
        seen.append(_run(how, args, tmp_path))
    cli, entry = seen
    assert entry[:4] == cli[:4]
    assert cli[4] is True  # (the CLI's own run imports click)
    if case == "good":
        assert cli[0] == 0 and set(cli[3]) == {"metrics.json", "report.md"}
        assert entry[4] is False  # the quick call never imported it
    else:
        assert cli[0] == 2 and "error: bad input" in cli[2]
