"""The known run the HTML report tests render (as text in test_html.py, in Chromium in test_html_browser.py)."""

from __future__ import annotations

from ext.eval import CallRecord, CaseResult, EvalReport, config_report, parse_case

HOSTILE = '<script>document.title="PWNED"</script><img src=x onerror="document.title=1">&amp; "quoted"'


def _result(case_id: str, category: str, correct: bool, **extra: object) -> CaseResult:
    return CaseResult(id=case_id, category=category, correct=correct, malformed=False, latency_s=0.25, **extra)  # type: ignore[arg-type]


def known_report() -> EvalReport:
    a = [
        _result("s1", "simple", True, calls=[CallRecord(name="get_weather", arguments='{"city": "Oslo"}')]),
        _result("s2", "simple", False, answer=HOSTILE, reason="no call made"),
        _result("i1", "irrelevance", True, answer="I cannot do that."),
    ]
    b = [
        _result("s1", "simple", True, calls=[CallRecord(name="get_weather", arguments='{"city": "Oslo"}')]),
        _result("s2", "simple", True, calls=[CallRecord(name="get_weather", arguments='{"city": "Bergen"}')]),
        _result("i1", "irrelevance", False, calls=[CallRecord(name="get_weather", arguments="{}")], reason="a call"),
    ]
    return EvalReport(dataset="known", configs=[config_report("alpha <b>", a), config_report("beta", b)])


def known_cases() -> list[object]:
    tool = {
        "name": "get_weather",
        "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    return [
        parse_case(
            {
                "id": "s1",
                "category": "simple",
                "messages": [{"role": "user", "content": "Weather in Oslo?"}],
                "tools": [tool],
                "expected": [{"name": "get_weather", "arguments": {"city": ["Oslo"]}}],
            }
        ),
        parse_case(
            {
                "id": "s2",
                "category": "simple",
                "messages": [{"role": "user", "content": HOSTILE + "x" * 50_000}],
                "tools": [tool],
                "expected": [{"name": "get_weather", "arguments": {"city": ["Bergen"]}}],
            }
        ),
        parse_case(
            {
                "id": "i1",
                "category": "irrelevance",
                "messages": [{"role": "user", "content": "Tell me a joke"}],
                "tools": [tool],
                "expected": {"no_call": True},
            }
        ),
    ]
