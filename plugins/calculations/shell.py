"""``core.shell``: run any shell command line, with input files and files to bring back."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from veglia.plugin_api import (
    CalcInfo,
    CalcJob,
    CodeInfo,
    ExitCode,
    FolderData,
    List,
    SinglefileData,
    Str,
    UnsafePathError,
    checked_relative,
)

__all__ = ["ShellJob", "shell_similarity_key"]


def shell_similarity_key(command: str, default: str) -> str:
    """The similarity key of a job that runs the command line ``command`` (not a code):
    ``default``, the key :meth:`CalcJob.similarity_key` gives it (``core.shell||COMPUTER``),
    and the command, hashed (the key is indexed, and a command line may be long); the
    whitespace around the command does not count."""
    digest = hashlib.sha256(command.strip().encode()).hexdigest()[:16]
    return f"{default}|command:{digest}"


def _port_name(path: str) -> str:
    name = re.sub(r"\W", "_", path).strip("_")
    return name if name and not name[0].isdigit() else f"file_{name}"


class ShellJob(CalcJob):
    """Run a shell command line (with bash) or a code with arguments.

    Input files (``files``) are copied into the work directory under their label (or the
    name given in ``filenames``); files matching ``outputs`` patterns come back as outputs,
    with ``stdout`` and ``stderr``. A non-zero exit status fails the job with exit 400.
    """

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input(
            "command",
            valid_type=Str,
            required=False,
            help="A bash command line (when there is no code).",
        )
        spec.input(
            "arguments", valid_type=List, required=False, help="Arguments of the code's executable."
        )
        spec.input_namespace(
            "files",
            valid_type=(SinglefileData, FolderData),
            dynamic=True,
            required=False,
            help="Files copied into the work dir.",
        )
        spec.input(
            "outputs",
            valid_type=List,
            required=False,
            help="Patterns of files to retrieve as outputs.",
        )
        spec.output("stdout", valid_type=SinglefileData, required=False)
        spec.output("stderr", valid_type=SinglefileData, required=False)
        spec.output_namespace("files", valid_type=SinglefileData, dynamic=True, required=False)
        spec.inputs.validator = _validate
        spec.exit_code(400, "ERROR_NONZERO_EXIT_STATUS", "The command exited with status {status}.")

    def similarity_key(self) -> str:
        """With a code, the default (the code is what runs); with a command line, the
        command too: ``sleep 1`` and a day-long simulation are not alike. The command is
        hashed (the key is indexed, and a command line may be long); the same text on the
        same computer gives the same key, so reruns of one command are still similar."""
        key = super().similarity_key()
        if self.code is not None or "command" not in self.inputs:
            return key
        return shell_similarity_key(self.inputs["command"].value, key)

    def prepare_for_submission(self, folder: Path) -> CalcInfo:
        local_copy = []
        for label, node in (self.inputs.get("files") or {}).items():
            if isinstance(node, SinglefileData):
                local_copy.append((node.uuid, node.filename, label))
            else:
                for name in node.list_object_names():
                    local_copy.append((node.uuid, name, f"{label}/{name}"))
        if self.code is not None:
            arguments = (
                [str(a) for a in self.inputs["arguments"].get_list()]
                if "arguments" in self.inputs
                else []
            )
            info = CodeInfo(cmdline_params=arguments)
        else:
            info = CodeInfo(executable="bash", cmdline_params=["-c", self.inputs["command"].value])
        info.stdout_name, info.stderr_name = "stdout", "stderr"
        patterns = self.inputs["outputs"].get_list() if "outputs" in self.inputs else []
        return CalcInfo(
            codes_info=[info],
            retrieve_list=["stdout", "stderr", *patterns],
            local_copy_list=local_copy,
        )

    def parse_retrieved(self, retrieved: FolderData, outcome: dict[str, Any]) -> ExitCode | None:
        names = retrieved.list_object_names()
        for stream in ("stdout", "stderr"):
            if stream in names:
                self.out(stream, SinglefileData(retrieved.get_object_blob(stream), stream))
        patterns = self.inputs["outputs"].get_list() if "outputs" in self.inputs else []
        import fnmatch

        for name in names:
            if any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
                # The retrieved file's blob, shared: an output of any size is not read.
                blob = retrieved.get_object_blob(name)
                self.out(f"files.{_port_name(name)}", SinglefileData(blob, Path(name).name))
        status = outcome.get("exit_status")
        if status not in (0, None):
            return self.exit_codes.ERROR_NONZERO_EXIT_STATUS.format(status=status)
        return super().parse_retrieved(retrieved, outcome)


def _validate(inputs: Any, _: Any) -> str | None:
    if "code" not in inputs and "command" not in inputs:
        return "give a `command` (a bash command line) or a `code`."
    patterns = inputs["outputs"].get_list() if "outputs" in inputs else []
    try:
        for name in inputs.get("files") or {}:
            checked_relative(name, "file name")
        for pattern in patterns:
            checked_relative(pattern, "output pattern")
    except UnsafePathError as exc:
        return str(exc)
    return None
