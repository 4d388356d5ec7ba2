"""``core.arithmetic.add``: the smallest calc job, for tests and benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veglia.plugin_api import CalcInfo, CalcJob, CodeInfo, ExitCode, Float, FolderData, Int

__all__ = ["ArithmeticAddJob"]


class ArithmeticAddJob(CalcJob):
    """Add ``x`` and ``y`` in a job (with bash, or the code given); output ``sum``."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("x", valid_type=(Int, Float))
        spec.input("y", valid_type=(Int, Float))
        spec.output("sum", valid_type=(Int, Float))
        spec.exit_code(410, "ERROR_NO_SUM", "The job printed no sum.")

    def prepare_for_submission(self, folder: Path) -> CalcInfo:
        x, y = self.inputs["x"].value, self.inputs["y"].value
        (folder / "aiida.in").write_text(f"echo $(({x} + {y}))\n")
        info = CodeInfo(
            executable=None if self.code else "bash", stdin_name="aiida.in", stdout_name="aiida.out"
        )
        return CalcInfo(codes_info=[info], retrieve_list=["aiida.out"])

    def parse_retrieved(self, retrieved: FolderData, outcome: dict[str, Any]) -> ExitCode | None:
        try:
            text = retrieved.get_object_content("aiida.out").decode().strip()
            value = int(text) if text.lstrip("-").isdigit() else float(text)
        except (ValueError, KeyError, Exception):
            return self.exit_codes.ERROR_NO_SUM
        self.out("sum", Int(value) if isinstance(value, int) else Float(value))
        return None
