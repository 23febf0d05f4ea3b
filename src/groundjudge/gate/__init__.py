"""Gate stage (SPEC 7): decide whether a release may ship.

:mod:`.check` refuses, before anything runs, gates that could not be evaluated;
:mod:`.evaluate` evaluates every gate of a run (what each reads and when it blocks is in its
docstring); :mod:`.regression` compares two configs of the run.
"""

from groundjudge.gate.check import check_gates
from groundjudge.gate.evaluate import GateReport, GateResult, evaluate_gates, gate_configs
from groundjudge.gate.regression import regression_gate

__all__ = ["GateReport", "GateResult", "check_gates", "evaluate_gates", "gate_configs", "regression_gate"]
