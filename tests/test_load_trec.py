"""TREC qrels and run readers: what they accept, and how they refuse what they must not."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundjudge.errors import InputError
from groundjudge.load.trec import read_qrels, read_run

REPO = Path(__file__).resolve().parents[1]
TREC = (REPO / ".." / "shared" / "data" / "trec").resolve()
needs_data = pytest.mark.skipif(not TREC.is_dir(), reason=f"reference data not found at {TREC}")

RUN_LINES = [f"q{q} Q0 d{d} {d} {10 - d / 10} tag" for q in (1, 2) for d in range(1, 40)]
QRELS_LINES = [f"q{q} 0 d{d} {d % 3}" for q in (1, 2) for d in range(1, 40)]


def write(tmp_path: Path, text: str | bytes, name: str = "input") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def refused(reader, path: Path) -> InputError:
    with pytest.raises(InputError) as caught:
        reader(path)
    assert len(caught.value.problems) == 1
    problem = caught.value.problems[0]
    assert problem.file == str(path)
    return caught.value


# --- accepted ------------------------------------------------------------------------------


def test_reads_a_run_ignoring_q0_rank_and_tag(tmp_path: Path) -> None:
    path = write(tmp_path, "q1\tQ0\td1\t7\t2.5\tbm25\nq1 x d2 1  -1e3 other\nq2 Q0 d1 1 0 t\n")
    assert read_run(path) == {"q1": [("d1", 2.5), ("d2", -1000.0)], "q2": [("d1", 0.0)]}


def test_reads_qrels_keeping_zero_and_negative_grades(tmp_path: Path) -> None:
    path = write(tmp_path, "q1 0 d1 2\nq1 0 d2 0\nq2 1 d1 -1\n")
    assert read_qrels(path) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d1": -1}}


@pytest.mark.parametrize(
    "transform",
    [
        lambda text: text.replace("\n", "\r\n"),  # Windows line ends
        lambda text: "\n\n" + text + "\n\n  \n",  # blank lines around
        lambda text: text.replace("\n", "\n\n", 5),  # blank lines inside
        lambda text: "\ufeff" + text,  # byte order mark
        lambda text: text.rstrip("\n"),  # no final newline
        lambda text: text.replace(" ", " \t "),  # any whitespace between columns
        lambda text: "\n".join(sorted(text.splitlines(), key=lambda line: line.split()[2])),  # q1, q2, q1...
    ],
    ids=["crlf", "blank-around", "blank-inside", "bom", "no-final-newline", "tabs", "interleaved"],
)
def test_layout_variations_read_the_same(tmp_path: Path, transform) -> None:
    run_text = "\n".join(RUN_LINES) + "\n"
    qrels_text = "\n".join(QRELS_LINES) + "\n"
    expected_run = read_run(write(tmp_path, run_text, "run"))
    expected_qrels = read_qrels(write(tmp_path, qrels_text, "qrels"))
    run = read_run(write(tmp_path, transform(run_text), "run2"))
    qrels = read_qrels(write(tmp_path, transform(qrels_text), "qrels2"))
    assert qrels == expected_qrels
    assert {qid: sorted(pairs) for qid, pairs in run.items()} == {
        qid: sorted(pairs) for qid, pairs in expected_run.items()
    }


@needs_data
@pytest.mark.parametrize(
    ("qrels_name", "run_name"),
    [
        ("trectools_robust03/robust03_cs_qrels.txt", "trectools_robust03/input.uic0301"),
        ("trec_eval_test/qrels.rel_level", "trec_eval_test/results.test"),
    ],
)
def test_real_files_read_as_pytrec_eval_reads_them(qrels_name: str, run_name: str) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    with open(TREC / qrels_name) as lines:
        assert read_qrels(TREC / qrels_name) == pytrec_eval.parse_qrel(lines)
    with open(TREC / run_name) as lines:
        expected = pytrec_eval.parse_run(lines)
    run = read_run(TREC / run_name)
    assert {qid: dict(pairs) for qid, pairs in run.items()} == expected
    assert sum(map(len, run.values())) == sum(map(len, expected.values()))


# --- refused -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reader", "lines", "bad_line", "field", "words"),
    [
        (read_qrels, ["q1 0 d1 1", "q1 0 d2", "q1 0 d3 1"], 2, None, "expected 4"),
        (read_qrels, ["q1 0 d1 1", "q1 0 d2 1 extra"], 2, None, "found 5"),
        (read_qrels, ["q1 0 d1 1", "q1 0 d2 1.5"], 2, "relevance", "'1.5' is not an integer"),
        (read_qrels, ["q1 0 d1 high"], 1, "relevance", "not an integer"),
        (read_qrels, ["q1 0 d1 1", "q1 0 d2 1_0"], 2, "relevance", "'1_0' is not an integer"),
        (read_qrels, ["q1 0 d1 1", "q2 0 d1 1", "q1 0 d1 0"], 3, "doc_id", "'d1' is judged twice for query 'q1'"),
        (read_run, ["q1 Q0 d1 1 1.0 t", "q1 Q0 d2 2 0.5"], 2, None, "expected 6"),
        (read_run, ["q1 Q0 d1 1 1.0 t extra"], 1, None, "found 7"),
        (read_run, ["q1 Q0 d1 1 1.0 t", "q1 Q0 d2 2 high t"], 2, "score", "'high' is not a number"),
        (read_run, ["q1 Q0 d1 1 1.0 t", "q1 Q0 d2 2 1_000.5 t"], 2, "score", "'1_000.5' is not a number"),
        (read_run, ["q1 Q0 d1 1 nan t"], 1, "score", "not a finite number"),
        (read_run, ["q1 Q0 d1 1 1.0 t", "q1 Q0 d2 2 -inf t"], 2, "score", "not a finite number"),
        (read_run, ["q1 Q0 d1 1 1.0 t", "q2 Q0 d1 1 1.0 t", "q1 Q0 d1 3 0.2 t"], 3, "doc_id", "'d1' appears twice"),
    ],
    ids=[
        "qrels-3-columns",
        "qrels-5-columns",
        "qrels-float-grade",
        "qrels-word-grade",
        "qrels-digit-separator",
        "qrels-duplicate",
        "run-5-columns",
        "run-7-columns",
        "run-word-score",
        "run-digit-separator",
        "run-nan",
        "run-inf",
        "run-duplicate",
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path: Path, reader, lines, bad_line, field, words) -> None:
    path = write(tmp_path, "\n".join(lines) + "\n")
    error = refused(reader, path)
    problem = error.problems[0]
    assert (problem.line, problem.field) == (bad_line, field)
    assert words in problem.problem
    assert str(error).startswith(f"{path}:{bad_line}: ")


def test_duplicate_message_points_at_the_first_occurrence(tmp_path: Path) -> None:
    path = write(tmp_path, "q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.9 t\nq1 Q0 d1 3 0.8 t\n")
    assert "first at line 1" in refused(read_run, path).problems[0].problem


@pytest.mark.parametrize("reader", [read_qrels, read_run])
def test_a_bad_line_deep_in_a_large_file_is_found(tmp_path: Path, reader) -> None:
    good = "q1 0 d{} 1" if reader is read_qrels else "q1 Q0 d{} 1 1.0 t"
    lines = [good.format(i) for i in range(20_000)]
    lines[15_321] = lines[15_321] + " surplus"
    path = write(tmp_path, "\n".join(lines) + "\n")
    assert refused(reader, path).problems[0].line == 15_322


@pytest.mark.parametrize("reader", [read_qrels, read_run])
@pytest.mark.parametrize("content", ["", "\n \n\t\n"], ids=["empty", "blank"])
def test_empty_file_is_refused(tmp_path: Path, reader, content: str) -> None:
    error = refused(reader, write(tmp_path, content))
    assert error.problems[0].line is None
    assert "empty" in error.problems[0].problem


@pytest.mark.parametrize("reader", [read_qrels, read_run])
def test_undecodable_bytes_are_refused_with_their_line(tmp_path: Path, reader) -> None:
    good = b"q1 0 d1 1\n" if reader is read_qrels else b"q1 Q0 d1 1 1.0 t\n"
    path = write(tmp_path, good * 3 + b"q1 0 d\xff2 1\n")
    problem = refused(reader, path).problems[0]
    assert (problem.line, problem.field) == (4, "encoding")
    assert "0xff" in problem.problem and "column 7" in problem.problem and "UTF-8" in problem.problem


@pytest.mark.parametrize("reader", [read_qrels, read_run])
def test_missing_file_is_an_input_error(tmp_path: Path, reader) -> None:
    error = refused(reader, tmp_path / "absent")
    assert "cannot read" in error.problems[0].problem


@pytest.mark.parametrize("grade", ["99999999999999999999999", "101", "-101"])
def test_a_grade_out_of_range_is_refused_before_any_metric(tmp_path: Path, grade: str) -> None:
    # ndcg_exp's gain 2**grade - 1 of the first grade would take all the memory there is: the
    # process runs under a memory limit, so a regression fails here instead of taking the machine
    import resource
    import subprocess
    import sys

    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"q1 0 d1 1\nq1 0 d2 {grade}\n")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d2 1 0.9 tag\nq1 Q0 d1 2 0.5 tag\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run([sys.executable, "-m", "groundjudge.cli", "metrics", "--qrels", str(qrels), "--run", str(run),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert f"qrels.txt:2: relevance: grade {grade[:40]} is out of range: grades are integers from -100 to 100" \
        in proc.stderr
    assert read_qrels(_qrels_with(tmp_path, "100")) == {"q1": {"d1": 1, "d2": 100}}  # the bounds themselves are fine


def _qrels_with(tmp_path: Path, grade: str) -> Path:
    path = tmp_path / "edge.txt"
    path.write_text(f"q1 0 d1 1\nq1 0 d2 {grade}\n")
    return path


def test_metrics_on_trec_files_loads_no_profile_judge_or_gate_code(tmp_path: Path) -> None:
    """`groundjudge metrics --qrels Q --run R` with no profile flag reads no profile's knobs and
    renders report.md from the metrics document alone: the profiles, the judge's engine, the gates
    and Arrow are never imported (they cost most of such a run's start-up)."""
    import subprocess
    import sys

    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d3 2 1.0 x\n")
    probe = ("import sys\nfrom groundjudge.cli import main\n"
             f"sys.argv = ['groundjudge', 'metrics', '--qrels', {str(qrels)!r}, '--run', {str(run)!r}, "
             f"'--out', {str(tmp_path / 'out')!r}, '--quiet']\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
             "heavy = ['groundjudge.profiles', 'groundjudge.report.document', 'groundjudge.gate', "
             "'groundjudge.judge.engine', 'pyarrow', 'scipy']\n"
             "print(sorted(m for m in heavy if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "recall@" in (tmp_path / "out" / "report.md").read_text()
