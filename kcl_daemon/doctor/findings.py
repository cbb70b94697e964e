"""What `kcl-daemon doctor` reports: one :class:`CheckResult` per check, in order, each with the facts it
read and its :class:`Finding` s (a problem, and what to do about it). Pure value types and rendering.

A finding is an ``error`` (the application cannot work as configured) or a ``warning`` (something is
wrong or about to go wrong); facts are only information. The exit status is non-zero when any check
has a finding, so ``doctor`` can gate a deployment.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from kcl_daemon.errors import ExitStatus


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Status(enum.StrEnum):
    OK = "ok"
    PROBLEM = "problem"
    SKIPPED = "skipped"  # could not run (an earlier check failed, or nothing to check)


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    #: what is wrong, naming the table, stream, lease or worker
    message: str
    #: what to do about it
    fix: str
    #: the lease key, worker, table or stream it is about (for --json readers)
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    title: str
    facts: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    skipped: str | None = None  # why the check did not run

    @property
    def status(self) -> Status:
        if self.skipped is not None:
            return Status.SKIPPED
        return Status.PROBLEM if self.findings else Status.OK

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "title": self.title,
            "status": str(self.status),
            "skipped": self.skipped,
            "facts": list(self.facts),
            "findings": [
                {"severity": str(f.severity), "subject": f.subject, "message": f.message, "fix": f.fix}
                for f in self.findings
            ],
        }


@dataclass(frozen=True, slots=True)
class DoctorReport:
    results: tuple[CheckResult, ...] = field(default_factory=tuple)

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for result in self.results for f in result.findings)

    @property
    def exit_status(self) -> ExitStatus:
        return ExitStatus.FAILED if self.findings else ExitStatus.OK

    def as_json(self) -> dict[str, object]:
        return {
            "ok": not self.findings,
            "errors": sum(1 for f in self.findings if f.severity is Severity.ERROR),
            "warnings": sum(1 for f in self.findings if f.severity is Severity.WARNING),
            "checks": [result.as_json() for result in self.results],
        }

    def text(self) -> str:
        lines: list[str] = []
        marks = {Status.OK: "ok     ", Status.PROBLEM: "PROBLEM", Status.SKIPPED: "skipped"}
        for index, result in enumerate(self.results, 1):
            lines.append(f"{index:>2}. [{marks[result.status]}] {result.title}")
            if result.skipped is not None:
                lines.append(f"      {result.skipped}")
            lines += [f"      {fact}" for fact in result.facts]
            for finding in result.findings:
                lines.append(f"      {finding.severity.upper()}: {finding.message}")
                lines.append(f"        what to do: {finding.fix}")
        errors = sum(1 for f in self.findings if f.severity is Severity.ERROR)
        warnings = len(self.findings) - errors
        lines.append("")
        lines.append(
            "no problem found"
            if not self.findings
            else f"{errors} error(s), {warnings} warning(s): see 'what to do' above"
        )
        return "\n".join(lines)


def result(
    name: str,
    title: str,
    facts: Sequence[str] = (),
    findings: Sequence[Finding] = (),
    skipped: str | None = None,
) -> CheckResult:
    return CheckResult(name, title, tuple(facts), tuple(findings), skipped)
