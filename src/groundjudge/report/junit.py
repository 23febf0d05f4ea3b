"""JUnit XML for CI systems: one test case per gate.

Its failures are exactly the run's failed blocking gates (SPEC 7): a gate that failed or had no
data while blocking is a ``failure``; an advisory gate, or one with no data that does not block,
is ``skipped``. Findings no gate covers (ACL leaks in a config the gates do not cover) are
written to the suite's output, not as failures: a build is red exactly when the verdict is FAIL.
The leaking cases of a gated config are listed in its ACL gate's failure.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from groundjudge.inert import terminal


def _failed(gate: dict[str, Any]) -> bool:
    return bool(gate["blocking"]) and gate["status"] in ("fail", "no_data")


def _leak_lines(doc: dict[str, Any], cfg: str) -> list[str]:
    lines = []
    for case_id, details in doc["per_config"].get(cfg, {}).get("case_details", {}).items():
        for x in details.get("acl_leaks") or []:
            lines.append(f"{case_id}: {x['chunk_id']} ({x['where']}): {x['reason']}")
    return lines


def junit_xml(doc: dict[str, Any]) -> str:
    gates = doc["gates"]
    suite = ET.Element("testsuite", name="groundjudge", tests="0", failures="0", skipped="0")
    failures = skipped = 0
    for gate in gates["results"]:
        case = ET.SubElement(suite, "testcase", classname=f"groundjudge.gates.{gate['config_id']}",
                             name=gate["name"])
        detail = f"value={gate['value']} n={gate['n']} threshold {gate['threshold']}: {gate['reason']}"
        if _failed(gate):
            failures += 1
            if gate.get("metric") == "acl_leak" and gate["status"] == "fail":
                detail += "\n" + "\n".join(_leak_lines(doc, gate["config_id"]))
            ET.SubElement(case, "failure", message=f"gate failed: {gate['name']}").text = detail
        elif gate["status"] != "pass":
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{gate['status']}: {gate['reason']}")
    notes = [f"ACL leak in {cfg}, a config no gate covers (reported, not gated): {line}"
             for cfg in gates.get("ungated_acl_leaks", {}) for line in _leak_lines(doc, cfg)]
    if notes:
        ET.SubElement(suite, "system-out").text = "\n".join(notes)
    suite.set("tests", str(len(gates["results"])))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    # control characters from ids and reasons are not allowed in XML: shown escaped (\x1b), the
    # file stays XML a CI system can read
    return terminal(ET.tostring(suite, encoding="unicode", xml_declaration=True), keep_newlines=True) + "\n"
