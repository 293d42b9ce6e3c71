"""Proving a conformance suite can fail: run it in-process on deliberately broken implementations and read which
cases failed, so a test can assert that exactly the broken cases fail (and the rest pass).

    def test_suite_fails_exactly_what_is_broken(pytester: pytest.Pytester) -> None:
        outcome = run_suite_inline(pytester, BROKEN)  # BROKEN: a test module's source, as a string
        assert outcome.failed == ["TestLosesUsage::test_text_create", ...]
        assert outcome.passed == 40

Needs pytest's `pytester` plugin (`pytest_plugins = ["pytester"]` or `-p pytester`). `run_suite_in_subprocess`
runs the module in a fresh interpreter instead: for an implementation that cannot be imported twice into one process
(llama.cpp, numpy), and for a run whose imports must not meet other in-process runs' (an inline run drops the modules
it imported afterwards, while module-level caches in what stays, such as an HTTP library's exception map, keep
the dropped classes).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

__all__ = ["INLINE_ARGS", "SuiteOutcome", "run_suite_in_subprocess", "run_suite_inline"]

INLINE_ARGS = ("-p", "no:randomly", "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function")
"""The options of the inner run: a fixed order, and the asyncio settings the suites are written for."""


@dataclass(frozen=True)
class SuiteOutcome:
    failed: list[str]
    """`Class::case` of each case whose call failed, sorted."""
    passed: int
    """How many cases passed."""


def run_suite_inline(pytester: pytest.Pytester, source: str, *args: str, name: str = "test_broken") -> SuiteOutcome:
    """Write `source` as the test module `name` and run it in this process, with pytest arguments `args` (e.g.
    `-k` to run only some cases)."""
    pytester.makepyfile(**{name: source})
    reprec = pytester.inline_run(*INLINE_ARGS, *args)
    reports = [r for r in reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    failed = sorted(r.nodeid.split("::", 1)[1] for r in reports if r.failed)
    return SuiteOutcome(failed=failed, passed=sum(1 for r in reports if r.passed))


def run_suite_in_subprocess(
    pytester: pytest.Pytester, source: str, *args: str, name: str = "test_broken"
) -> SuiteOutcome:
    """`run_suite_inline` in a fresh interpreter (`pytester.runpytest_subprocess`)."""
    pytester.makepyfile(**{name: source})
    result = pytester.runpytest_subprocess(*INLINE_ARGS, "-p", "no:cacheprovider", "-rfE", *args)
    failed = sorted(
        line.split()[1].split("::", 1)[1] for line in result.outlines if line.startswith(("FAILED ", "ERROR "))
    )
    return SuiteOutcome(failed=failed, passed=result.parseoutcomes().get("passed", 0))
