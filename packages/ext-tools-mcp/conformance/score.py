"""The conformance score as the README's markdown table: `python score.py RESULTS_DIR` (run.sh's results)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REVISIONS = ["2025-03-26", "2025-06-18", "2025-11-25", "draft", "extension"]


def main() -> None:
    root = Path(sys.argv[1])
    listed = Path(__file__).with_name("expected-failures.yml").read_text()
    expected = set(re.findall(r"^  - ([\w/.-]+)", listed, re.MULTILINE))
    print("| revision | scenario | checks passed | result |")
    print("|---|---|---|---|")
    totals = [0, 0]
    for revision in REVISIONS:
        for checks_file in sorted((root / revision).rglob("checks.json")):
            # Result folders are named <scenario>-<ISO timestamp>.
            scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", str(checks_file.parent.relative_to(root / revision)))
            checks = json.loads(checks_file.read_text())
            scored = [c for c in checks if c.get("status") in ("SUCCESS", "FAILURE")]
            passed = sum(c["status"] == "SUCCESS" for c in scored)
            warnings = sum(c.get("status") == "WARNING" for c in checks)
            ok = passed == len(scored) and not warnings
            totals[0] += ok
            totals[1] += 1
            result = "pass" if ok else ("expected failure" if scenario in expected else "FAIL")
            print(f"| {revision} | `{scenario}` | {passed}/{len(scored)} | {result} |")
    print(f"\n{totals[0]} of {totals[1]} scenario runs pass.")


if __name__ == "__main__":
    main()
