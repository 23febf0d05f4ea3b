"""JUnit XML for CI systems: one test case per gate.

Its failures are exactly the run's failed blocking gates (SPEC 7): a gate that failed or had no
data while blocking is a ``failure``; an advisory gate, or one with no data that does not block,
is ``skipped``. Findings no gate covers (ACL leaks in a config the gates do not cover) are
written to the suite's output, not as failures: a build is red exactly when the verdict is FAIL.
The leaking cases of a gated config are listed in its ACL gate's failure.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from groundjudge.inert import terminal

if TYPE_CHECKING:
    from groundjudge.report.document import ReportDocument


def _leak_lines(doc: ReportDocument, cfg: str) -> list[str]:
    lines = []
    section = doc.per_config.get(cfg)
    for case_id, details in (section.case_details if section is not None else {}).items():
        for x in details.acl_leaks:
            lines.append(f"{case_id}: {x['chunk_id']} ({x['where']}): {x['reason']}")
    return lines


def junit_xml(doc: ReportDocument) -> str:
    gates = doc.gates
    suite = ET.Element("testsuite", name="groundjudge", tests="0", failures="0", skipped="0")
    failures = skipped = 0
    for gate in gates.results:
        case = ET.SubElement(suite, "testcase", classname=f"groundjudge.gates.{gate.config_id}",
                             name=gate.name)
        detail = f"value={gate.value} n={gate.n} threshold {gate.threshold}: {gate.reason}"
        if gate.failed:
            failures += 1
            if gate.metric == "acl_leak" and gate.status == "fail":
                detail += "\n" + "\n".join(_leak_lines(doc, gate.config_id))
            ET.SubElement(case, "failure", message=f"gate failed: {gate.name}").text = detail
        elif gate.status != "pass":
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{gate.status}: {gate.reason}")
    notes = [f"ACL leak in {cfg}, a config no gate covers (reported, not gated): {line}"
             for cfg in gates.ungated_acl_leaks for line in _leak_lines(doc, cfg)]
    if notes:
        ET.SubElement(suite, "system-out").text = "\n".join(notes)
    suite.set("tests", str(len(gates.results)))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    # control characters from ids and reasons are not allowed in XML: shown escaped (\x1b), the
    # file stays XML a CI system can read
    return terminal(ET.tostring(suite, encoding="unicode", xml_declaration=True), keep_newlines=True) + "\n"
