"""`groundjudge metrics` on TREC files alone takes a path without the settings models
(``groundjudge.trec_config``, ``report.trec_json.write_trec_reports``): it must write the very
files, print the very text and fail with the very errors of the general path, which validates
the settings and the document with the models."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from groundjudge import api
from groundjudge.cli import main
from groundjudge.config import PATH_FIELDS
from groundjudge.config_file import DEFAULT_KS
from groundjudge.trec_config import PATH_SETTINGS, TrecSettings, trec_settings

ROOT = Path(__file__).resolve().parent.parent
TREC = (ROOT / ".." / "shared" / "data" / "trec").resolve()
ROBUST = TREC / "trectools_robust03"
TREC_EVAL = TREC / "trec_eval_test"


@pytest.fixture(autouse=True)
def _no_settings_from_outside(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)  # no groundjudge.toml of the checkout
    for var in [v for v in os.environ if v.startswith("GROUNDJUDGE_")]:
        monkeypatch.delenv(var)
    yield


def _invoke(args: list[str], monkeypatch: pytest.MonkeyPatch, *, lean: bool) -> Result:
    """``groundjudge metrics ARGS`` by the TREC-only path (then the settings models are never
    asked) or by the general one (the TREC-only path refused)."""
    with monkeypatch.context() as patch:
        if lean:
            def unasked(*args: object, **kwargs: object) -> None:
                raise AssertionError("the TREC-only call went through the settings models")

            patch.setattr(api, "resolve_config", unasked)
        else:
            patch.setattr("groundjudge.trec_config.trec_settings", lambda *args, **kwargs: None)
        return CliRunner().invoke(main, ["metrics", *args], catch_exceptions=False)


def _both(args: list[str], out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Result, dict[str, bytes]]:
    """Runs ``args`` (writing into ``out``) both ways; asserts that exit code, stdout, stderr and
    every file written are the same, byte for byte. Returns the general path's result and files."""
    seen = []
    for lean in (False, True):
        if out.is_dir():
            for path in out.iterdir():
                path.unlink()
        result = _invoke([*args, "--out", str(out)], monkeypatch, lean=lean)
        files = {path.name: path.read_bytes() for path in sorted(out.iterdir())} if out.is_dir() else {}
        seen.append((result.exit_code, result.stdout, result.stderr, files))
    assert seen[1] == seen[0]
    return result, seen[0][3]


@pytest.mark.skipif(not ROBUST.is_dir(), reason=f"reference data not found at {ROBUST}")
@pytest.mark.parametrize("quiet", [True, False])
def test_robust03_files_are_those_of_the_general_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      quiet: bool) -> None:
    args = ["--qrels", str(ROBUST / "robust03_cs_qrels.txt"), "--run", str(ROBUST / "input.uic0301")]
    result, files = _both([*args, *(["--quiet"] if quiet else [])], tmp_path / "out", monkeypatch)
    assert result.exit_code == 0 and set(files) == {"metrics.json", "report.md"}
    assert b"| map | 0.2396 (n=100) |" in files["report.md"]


@pytest.mark.skipif(not TREC_EVAL.is_dir(), reason=f"reference data not found at {TREC_EVAL}")
def test_trec_eval_test_files_with_cutoffs_are_those_of_the_general_path(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["--qrels", str(TREC_EVAL / "qrels.test"), "--run", str(TREC_EVAL / "results.test"),
            "--k", "20", "--k", "2", "--k", "20", "--quiet"]
    result, files = _both(args, tmp_path / "out", monkeypatch)
    assert result.exit_code == 0 and b'"ks": [\n      2,\n      20\n    ]' in files["metrics.json"]


ODD_IDS = ["q|1", "`q2`", "*q3*", "<q4>", "ü5", "[q6](x)", "q7\\", "_q8_", "#9", "q\u200b10", "&amp;"]


def _hostile(tmp_path: Path) -> tuple[Path, Path]:
    qrels = tmp_path / "qrels ü|`x`.txt"
    run = tmp_path / "run |`*ü*`<b>.txt"
    qrels.write_text("".join(f"{qid} 0 {qid}-d{d} {d % 3}\n" for qid in ODD_IDS for d in range(4))
                     + "only-in-qrels 0 d 1\nno-relevant 0 d 0\n", encoding="utf-8")
    run.write_text("".join(f"{qid} Q0 {qid}-d{d} {d} {1.5 - d / 7} t|`\n" for qid in ODD_IDS[:-1] for d in (3, 2, 9))
                   + "only-in-run Q0 d 1 1 t\nno-relevant Q0 d 1 2 t\n", encoding="utf-8")
    return qrels, run


@pytest.mark.parametrize("quiet", [True, False])
def test_odd_ids_and_names_give_the_files_of_the_general_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              quiet: bool) -> None:
    qrels, run = _hostile(tmp_path)
    args = ["--qrels", str(qrels), "--run", str(run), *(["--quiet"] if quiet else [])]
    result, files = _both(args, tmp_path / "out", monkeypatch)
    assert result.exit_code == 0 and b"`q2`" in files["metrics.json"]


def test_a_run_sharing_no_query_with_the_qrels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    run.write_text("q2 Q0 d1 1 1.0 t\n", encoding="utf-8")
    result, files = _both(["--qrels", str(qrels), "--run", str(run)], tmp_path / "out", monkeypatch)
    assert result.exit_code == 0 and b'"scored": {\n      "run": 0\n    }' in files["metrics.json"]


@pytest.mark.parametrize("problem", ["empty run", "bad line", "duplicate", "out is a file", "missing file"])
def test_bad_input_fails_as_on_the_general_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                problem: str) -> None:
    qrels, run = _hostile(tmp_path)
    out = tmp_path / "out"
    if problem == "empty run":
        run.write_text("\n \n", encoding="utf-8")
    elif problem == "bad line":
        qrels.write_text("q1 0 d1 2\nq1 0 d2 high\n", encoding="utf-8")
    elif problem == "duplicate":
        run.write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d1 2 0.5 t\n", encoding="utf-8")
    elif problem == "out is a file":
        out.write_text("", encoding="utf-8")
    else:
        run = tmp_path / "no such run"
    result, files = _both(["--qrels", str(qrels), "--run", str(run), "--quiet"], out, monkeypatch)
    assert result.exit_code == 2 and not files
    assert result.stderr.startswith("error: bad input\n  ") and result.stderr.count("\n") == 2


def test_a_config_naming_only_the_files_takes_the_trec_only_path(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    qrels, run = _hostile(tmp_path)
    config = tmp_path / "conf" / "gj.toml"
    config.parent.mkdir()
    config.write_text(f'[inputs]\nqrels = "../{qrels.name}"\nrun = "{run}"\n[metrics]\nks = [3, 1]\n'
                      '[output]\nout = "../reports"\n', encoding="utf-8")
    _both(["--config", str(config), "--quiet"], tmp_path / "reports", monkeypatch)
    assert trec_settings(config, {}, {}) == TrecSettings(qrels, run, (1, 3), tmp_path / "reports")


def test_what_the_trec_only_path_leaves_to_the_models(tmp_path: Path) -> None:
    flags = {"inputs.qrels": Path("q"), "inputs.run": Path("r"), "metrics.ks": (), "output.out": None}
    assert trec_settings(None, flags, {}) == TrecSettings(Path("q"), Path("r"), DEFAULT_KS, None)
    assert trec_settings(None, {**flags, "inputs.traces": (Path("t"),)}, {}) is None
    assert trec_settings(None, {**flags, "inputs.run": None}, {}) is None  # the models say what is missing
    assert trec_settings(None, flags, {"GROUNDJUDGE_CONCURRENCY": "many"}) is None
    assert trec_settings(None, flags, {"GROUNDJUDGE_CONCURRENCY": ""}) is not None  # empty: not set
    for toml in ('[judge]\n', '[inputs]\nformat = "trec"\n', '[metrics]\nks = [0]\n', '[metrics]\nks = [true]\n',
                 '[metrics]\nks = []\n', '[inputs]\nqrels = 1\n', 'source = "x"\n', '[output]\nhistory = "h"\n'):
        config = tmp_path / "gj.toml"
        config.write_text(toml, encoding="utf-8")
        assert trec_settings(config, flags, {}) is None, toml
    (tmp_path / "groundjudge.toml").write_text("[judge]\n", encoding="utf-8")  # read when no --config
    assert trec_settings(None, flags, {}) is None
    assert set(PATH_SETTINGS) <= PATH_FIELDS


def test_a_config_the_models_refuse_fails_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qrels, run = _hostile(tmp_path)
    config = tmp_path / "gj.toml"
    config.write_text("[metrics]\nks = [0]\n[nonsense]\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["metrics", "--config", str(config), "--qrels", str(qrels), "--run", str(run),
                                       "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2
    assert "metrics.ks" in result.stderr and "nonsense: unknown setting" in result.stderr


@pytest.mark.skipif(not TREC_EVAL.is_dir(), reason=f"reference data not found at {TREC_EVAL}")
def test_the_trec_only_call_imports_no_settings_model(tmp_path: Path) -> None:
    script = ("import sys\nfrom groundjudge.cli import main\n"
              "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
              "heavy = sorted(m for m in ('pydantic', 'groundjudge.config', 'groundjudge.api', 'numpy', 'pyarrow', "
              "'rich', 'msgspec') if m in sys.modules)\n"
              "assert not heavy, heavy\n")
    args = ["metrics", "--qrels", str(TREC_EVAL / "qrels.test"), "--run", str(TREC_EVAL / "results.test"),
            "--out", str(tmp_path / "out"), "--quiet"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDJUDGE_")}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_config_value_the_models_refuse_is_refused_though_a_flag_overrides_it(tmp_path: Path) -> None:
    flags = {"inputs.qrels": Path("q"), "inputs.run": Path("r"), "metrics.ks": (5,), "output.out": Path("o")}
    for toml in ('[inputs]\nqrels = 1\n', '[metrics]\nks = [0]\n', '[output]\nout = ["o"]\n'):
        config = tmp_path / "gj.toml"
        config.write_text(toml, encoding="utf-8")
        assert trec_settings(config, flags, {}) is None, toml
