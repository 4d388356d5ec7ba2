"""What a calculation hands the engine: the command lines and files of one job."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CalcInfo", "CodeInfo"]


@dataclass
class CodeInfo:
    """One command line of the job: ``executable args < stdin > stdout 2> stderr``.

    ``executable`` defaults to the code's; set it for calculations that need no code.
    """

    cmdline_params: list[str] = field(default_factory=list)
    executable: str | None = None
    stdin_name: str | None = None
    stdout_name: str | None = None
    stderr_name: str | None = None
    withmpi: bool = False


@dataclass
class CalcInfo:
    """The files and commands of a job, returned by ``prepare_for_submission``."""

    codes_info: list[CodeInfo]
    retrieve_list: list[str] = field(default_factory=list)
    #: (node uuid, path in its repository, path in the work dir)
    local_copy_list: list[tuple[str, str, str]] = field(default_factory=list)
    #: (absolute source path on the computer, path in the work dir)
    remote_copy_list: list[tuple[str, str]] = field(default_factory=list)
    remote_symlink_list: list[tuple[str, str]] = field(default_factory=list)
