"""The verdict section of report.md: pass or fail first, then every gate with its reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from groundjudge.inert import markdown, markdown_code
from groundjudge.report.numbers import number as _value

if TYPE_CHECKING:
    from groundjudge.gate import GateReport


def render_gates_markdown(gates: GateReport) -> str:
    verdict = "PASS" if gates.passed else "FAIL"
    out = [f"## Verdict: **{verdict}**", ""]
    if gates.failed:
        out += ["Failed gates: " + "; ".join(markdown_code(name) for name in gates.failed), ""]
    gated = gates.gated_configs
    if gated:
        out += [f"Gates cover {'config' if len(gated) == 1 else 'configs'} "
                + ", ".join(map(markdown_code, gated)) + "; other configs are reported, not gated.", ""]
    out += ["| gate | value | n | status | why |", "|---|---|---|---|---|"]
    for r in gates.results:
        status: str = r.status
        if r.status == "no_data":
            status += " (fails: blocking)" if r.blocking else " (not blocking)"
        elif r.status == "fail" and not r.blocking:
            status += " (advisory)"
        out.append(f"| {markdown(r.name)} | {_value(r.value)} | {r.n} | {markdown(status)} | "
                   f"{markdown(r.reason)} |")
    if gates.trust:
        out += ["", "Judge trust (docs/calibration.md, \"Calibration: when may judge scores gate?\"): "
                + "; ".join(f"{markdown(m)}: {markdown(t.reason)}" for m, t in gates.trust.items())]
    return "\n".join(out) + "\n"
