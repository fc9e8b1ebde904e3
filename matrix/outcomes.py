"""How a run can fail: the failure kinds a case may expect and the verdicts name.

``matrix.judge.runs`` says how each is recognised; docs/tables.md says what each means to
a reader. A case may pin one as the expectation for a variant, to say *how* it must fail.
"""

from __future__ import annotations

from typing import Literal

FailureKind = Literal[
    "stall",
    "not_admitted",
    "preempted",
    "step_bound",
    "stuck",
    "expectation",
    "leak",
    "protocol",
    "decision",
    "error",
    "timeout",
]

# A cell the installed release cannot run (a connector, a Mamba mode, a layout it lacks; no
# asynchronous load to test), in every report's words, always beside its reason. The JSON
# keeps its record's fields: ``observed: skip``, ``kind: skipped``, the reason in ``detail``.
UNSUPPORTED = "unsupported"

# How bad a failing pool is, worst first: whether a deployment can reach it, judged by the
# pool against the case's fit and the smallest pool vLLM's start-up sizing gives its engine
# (``matrix.judge.severity`` classifies; docs/tables.md's severity table says what each means).
Severity = Literal[
    "deadlock",
    "leak",
    "protocol",
    "error",
    "timeout",
    "sizer",
    "unpromotable",
    "over_reservation",
    "decision",
    "expectation",
    "undersized",
]
# Severities a reader must hear of even when a case expects them (the reports' findings): an
# engine that hangs or breaks, or one vLLM starts that cannot finish what it accepted.
SEVERE: tuple[Severity, ...] = ("deadlock", "leak", "protocol", "error", "timeout", "sizer")
