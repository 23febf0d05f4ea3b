"""JUnit XML for CI systems: one test case per gate and per critical case."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from groundjudge.inert import terminal


def junit_xml(doc: dict[str, Any]) -> str:
    gates = doc["gates"]["results"]
    suite = ET.Element("testsuite", name="groundjudge", tests="0", failures="0", skipped="0")
    failures = skipped = total = 0
    for gate in gates:
        total += 1
        case = ET.SubElement(suite, "testcase", classname=f"groundjudge.gates.{gate['config_id']}",
                             name=gate["name"])
        detail = f"value={gate['value']} n={gate['n']} threshold {gate['threshold']}: {gate['reason']}"
        if gate["status"] == "fail" and gate["blocking"]:
            failures += 1
            ET.SubElement(case, "failure", message=f"gate failed: {gate['name']}").text = detail
        elif gate["status"] in ("advisory", "no_data"):
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{gate['status']}: {gate['reason']}")
    for cfg in doc["configs"]:
        for case_id, details in doc["per_config"][cfg].get("case_details", {}).items():
            if details.get("acl_leaks"):
                total += 1
                failures += 1
                case = ET.SubElement(suite, "testcase", classname=f"groundjudge.critical.{cfg}", name=case_id)
                leaks = "; ".join(f"{x['chunk_id']} ({x['where']}): {x['reason']}" for x in details["acl_leaks"])
                ET.SubElement(case, "failure", message="ACL leak").text = leaks
    suite.set("tests", str(total))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    # control characters from ids and reasons are not allowed in XML: shown escaped (\x1b), the
    # file stays XML a CI system can read
    return terminal(ET.tostring(suite, encoding="unicode", xml_declaration=True), keep_newlines=True) + "\n"
