"""The session side of the pytest plugin: ``--monitoring-save``, ``--monitoring-compare``
and ``--monitoring-json`` (imported only when one of them is given)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ._errors import BadValue
from ._results.decide import REGRESSED, UNDECIDED
from ._results.gate import Baseline, figure_names, parse_threshold, session_data
from ._results.store import load_result, make_result, save_result

EXPORT_SCHEMA = "onnxrt-monitoring-session"


def _check_output(option: str, path: str, force: bool, inputs: Sequence[str]) -> str:
    """Refuses an output before any test runs: not ``.json``, an input, or an existing
    file without ``--monitoring-force``; returns it absolute (a test may ``chdir``)."""
    if not path:
        raise BadValue(f"{option} {path!r}: the path is empty")
    if os.path.islink(path) and not os.path.exists(path):
        raise BadValue(f"{option} {path!r}: a symbolic link to a file that does not exist")
    if not path.endswith(".json"):
        raise BadValue(f"{option} {path!r} must end with .json")
    full = os.path.abspath(path)
    if any(os.path.abspath(i) == full for i in inputs):
        raise BadValue(f"{option} {path!r} is the baseline --monitoring-compare reads")
    if os.path.isdir(full) or not os.path.isdir(os.path.dirname(full)):
        raise BadValue(f"{option} {path!r}: not a file in an existing folder")
    if os.path.exists(full) and not force:
        raise BadValue(f"{option} {path!r} exists; add --monitoring-force to replace it")
    return full


def _session_result(path: str) -> dict[str, Any]:
    """The baseline of ``--monitoring-compare``: a session saved by
    ``--monitoring-save``, refused (one line) when it is a result of another kind."""
    doc = load_result(path)
    command = doc.get("command") or []
    data = doc["data"] if doc["kind"] == "report" else {}
    names = [s.get("name", "") for s in data.get("timing", {}).get("series", [])]
    names += list(data.get("memory", {}).get("channels", {}))
    if doc["kind"] == "report" and (command[:1] == ["pytest"] or any("::" in n for n in names)):
        return doc
    made = " ".join(command[:2]) if command else "another command"
    raise BadValue(
        f"--monitoring-compare {path!r} is a {doc['kind']} result saved by {made!r}, not a "
        "pytest session: give a file saved by --monitoring-save"
    )


class Session:
    """Collects every test's figures, judges them against a baseline, and writes the
    result and the table at the end.

    :param save: the result to write, None for none
    :param compare: the baseline to read, None for none
    :param export: the JSON table to write, None for none
    :param threshold: ``10%`` or ``0.1``
    :param force: let ``save`` and ``export`` replace existing files
    :param worker: a pytest-xdist worker: it judges its tests, the controller writes
    :raises BadValue: a bad option
    :raises ResultFormatError: the baseline is not a readable result
    """

    def __init__(
        self,
        save: str | None,
        compare: str | None,
        export: str | None,
        threshold: str,
        force: bool,
        worker: bool = False,
    ) -> None:
        self.threshold = parse_threshold(threshold)
        self.compare = compare
        inputs = [compare] if compare is not None else []
        self.worker = worker
        check = not worker  # the controller checked them already
        self.save = save
        if save is not None and check:
            self.save = _check_output("--monitoring-save", save, force, inputs)
        self.export = export
        if export is not None and check:
            self.export = _check_output("--monitoring-json", export, force, inputs)
        if self.save and self.export and self.save == self.export:
            raise BadValue("--monitoring-save and --monitoring-json name the same file")
        # Read after the outputs are checked: a wrong command line is named first.
        self.baseline = None if compare is None else Baseline(_session_result(compare))
        self.rows: list[dict[str, Any]] = []
        self.regressed: list[str] = []
        self.undecided: list[str] = []
        self.lines: list[str] = []
        self.failed_write = False

    def judge(self, report: Any, figures: Sequence[Mapping[str, Any]]) -> None:
        """Fails a passed test whose figures regressed beyond the threshold.

        :param report: the test's call report
        :param figures: what it measured
        """
        if self.baseline is None or not report.passed:
            return
        found = self.baseline.check(report.nodeid, figures, self.threshold)
        undecided = [r.message for r in found if r.state == UNDECIDED]
        if undecided:  # never a pass in silence: in the report and the summary
            report.monitoring_undecided = undecided
            report.sections.append(
                ("monitoring gate", "\n".join(f"undecided: {m}" for m in undecided))
            )
        regressed = [r for r in found if r.state == REGRESSED]
        if not regressed:
            return
        report.outcome = "failed"
        report.longrepr = f"monitoring: regressed compared with {self.compare}\n" + "\n".join(
            f"  {r.message}" for r in regressed
        )

    def pytest_runtest_logreport(self, report: Any) -> None:
        """Keeps the figures of each test's call."""
        figures = getattr(report, "monitoring", None)
        if report.when != "call" or not figures:
            return
        names = figure_names(report.nodeid, figures)
        blocks = [{"name": n, **f} for n, f in zip(names, figures, strict=True)]
        self.rows.append(
            {
                "test": report.nodeid,
                "outcome": report.outcome,
                "duration": float(report.duration),
                "blocks": blocks,
            }
        )
        if report.failed and str(report.longrepr).startswith("monitoring: regressed"):
            self.regressed.append(report.nodeid)
        for message in getattr(report, "monitoring_undecided", None) or ():
            self.undecided.append(f"{report.nodeid}: {message}")

    def pytest_sessionfinish(self, session: Any) -> None:
        """Writes the result and the table (in the controller only)."""
        if self.worker:
            return
        if self.compare is not None:
            self.lines.append(
                f"compared with {self.compare}: {len(self.regressed)} test(s) regressed "
                f"beyond {self.threshold:.0%}, {len(self.undecided)} figure(s) undecided"
            )
            self.lines.extend(f"undecided: {line}" for line in self.undecided)
        if self.save:
            self._write_result(session)
        if self.export:
            self._write("--monitoring-json", self.export, self._export_text())
        if self.failed_write and session.exitstatus == 0:
            session.exitstatus = 1

    def _write_result(self, session: Any) -> None:
        data = session_data([(row["test"], row["blocks"]) for row in self.rows])
        if data is None:
            self.lines.append(
                f"--monitoring-save {self.save}: no test measured anything, not written"
            )
            return
        args = [str(a) for a in session.config.invocation_params.args]
        doc = make_result("report", data, ["pytest", *args])
        try:
            save_result(self.save or "", doc, force=True)  # refused at the start if not --force
        except OSError as e:
            self._failed("--monitoring-save", self.save or "", e, json.dumps(doc))
            return
        self.lines.append(f"saved the figures of {len(self.rows)} test(s) to {self.save}")

    def _failed(self, option: str, path: str, error: OSError, text: str) -> None:
        """A write that failed after the tests: the figures go to a file of the temporary
        folder, named (never lost without a word), and the session fails."""
        from ._cli.common import save_fallback

        def write(where: str) -> None:
            with open(where, "w", encoding="utf-8") as f:
                f.write(text + "\n")

        self.failed_write = True
        line = f"{option} {path}: cannot write ({error.strerror or error})"
        try:
            line += f"; saved to {save_fallback(write, '.json')} instead"
        except OSError as again:
            line += f"; nor elsewhere ({again.strerror or again}): the figures are lost"
        self.lines.append(line)

    def _export_text(self) -> str:
        doc = {"schema": EXPORT_SCHEMA, "version": 1, "tests": self.rows}
        return json.dumps(doc, indent=1, allow_nan=False)

    def _write(self, option: str, path: str, text: str) -> None:
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as e:
            self._failed(option, path, e, text)
            return
        self.lines.append(f"wrote the table of {len(self.rows)} test(s) to {path}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Says what was saved, compared and written."""
        for line in self.lines:
            terminalreporter.write_line(f"monitoring: {line}")
