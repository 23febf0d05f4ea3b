"""groundjudge: grade the answers of RAG systems and decide whether a release may ship.

    import groundjudge as gj
    config = gj.resolve_config("examples/groundjudge.toml")
    with gj.open_judge(config) as judge:
        result = gj.run_eval(config, judge)
    gj.write_run_reports(result, "runs/notebook")

Names are imported on first use, so ``import groundjudge`` (and the command line) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.3.0"

if TYPE_CHECKING:
    # What type checkers and editors see. At run time each name is imported on first use by
    # __getattr__ below; tests/test_package.py keeps these imports, _EXPORTS and __all__ the same.
    from groundjudge.api import (
        Calibration,
        RunResult,
        annotate_phoenix,
        batch_step,
        calibrate,
        check_gate_config,
        check_outputs,
        compare,
        compute_metrics,
        fetch_phoenix,
        for_profile,
        history_path,
        history_record,
        judge_findings,
        load_inputs,
        open_escalation,
        open_judge,
        position_probe,
        profile_report,
        profile_settings,
        report_document,
        resolve_config,
        rubric_for,
        run_eval,
        stability_plan,
        stability_reask,
        try_demos,
        write_metrics_reports,
        write_otel_events,
        write_run_reports,
    )
    from groundjudge.config import Config
    from groundjudge.errors import GroundjudgeError, InputError, JudgeUnavailable, StorageError
    from groundjudge.gate import GateReport
    from groundjudge.history.record import PendingHistory, append_history
    from groundjudge.judge.results import CaseJudgement, JudgeRun
    from groundjudge.judge.rubric import Rubric
    from groundjudge.judge.session import JudgeSession
    from groundjudge.load.dataset import Dataset

# public name -> module that defines it
_EXPORTS = {
    "resolve_config": "groundjudge.api",
    "load_inputs": "groundjudge.api",
    "check_outputs": "groundjudge.api",
    "rubric_for": "groundjudge.api",
    "check_gate_config": "groundjudge.api",
    "open_judge": "groundjudge.api",
    "open_escalation": "groundjudge.api",
    "batch_step": "groundjudge.api",
    "history_path": "groundjudge.api",
    "history_record": "groundjudge.api",
    "append_history": "groundjudge.history.record",
    "PendingHistory": "groundjudge.history.record",
    "run_eval": "groundjudge.api",
    "RunResult": "groundjudge.api",
    "report_document": "groundjudge.api",
    "write_run_reports": "groundjudge.api",
    "write_otel_events": "groundjudge.api",
    "fetch_phoenix": "groundjudge.api",
    "annotate_phoenix": "groundjudge.api",
    "compute_metrics": "groundjudge.api",
    "write_metrics_reports": "groundjudge.api",
    "profile_report": "groundjudge.api",
    "profile_settings": "groundjudge.api",
    "for_profile": "groundjudge.api",
    "judge_findings": "groundjudge.api",
    "calibrate": "groundjudge.api",
    "Calibration": "groundjudge.api",
    "position_probe": "groundjudge.api",
    "try_demos": "groundjudge.api",
    "stability_plan": "groundjudge.api",
    "stability_reask": "groundjudge.api",
    "compare": "groundjudge.api",
    "Config": "groundjudge.config",
    "JudgeSession": "groundjudge.judge.session",
    "JudgeRun": "groundjudge.judge.results",
    "CaseJudgement": "groundjudge.judge.results",
    "GateReport": "groundjudge.gate",
    "Rubric": "groundjudge.judge.rubric",
    "Dataset": "groundjudge.load.dataset",
    "GroundjudgeError": "groundjudge.errors",
    "InputError": "groundjudge.errors",
    "JudgeUnavailable": "groundjudge.errors",
    "StorageError": "groundjudge.errors",
}

__all__ = [
    "Calibration", "CaseJudgement", "Config", "Dataset", "GateReport", "GroundjudgeError", "InputError", "JudgeRun",
    "JudgeSession", "JudgeUnavailable", "PendingHistory", "Rubric", "RunResult", "StorageError", "__version__",
    "annotate_phoenix", "append_history", "batch_step", "calibrate", "check_gate_config", "check_outputs", "compare",
    "compute_metrics", "fetch_phoenix", "for_profile", "history_path", "history_record", "judge_findings", "load_inputs", "open_escalation", "open_judge",
    "position_probe", "profile_report", "profile_settings", "report_document", "resolve_config", "rubric_for",
    "run_eval", "stability_plan", "stability_reask", "try_demos", "write_metrics_reports", "write_otel_events",
    "write_run_reports",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'groundjudge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
