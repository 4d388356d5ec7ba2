"""Drawing dot text as an image with Graphviz's ``dot``, for ``veglia node graph -o x.png``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from veglia.exceptions import ConfigurationError

__all__ = ["IMAGE_FORMATS", "render_image"]

#: File name suffixes drawn as images; any other name gets the dot text.
IMAGE_FORMATS = ("png", "svg", "pdf")


def render_image(text: str, output: Path) -> bool:
    """Draw ``text`` into ``output`` when its suffix names an image format; False for any
    other suffix (the caller writes the dot text)."""
    fmt = output.suffix.lower().lstrip(".")
    if fmt not in IMAGE_FORMATS:
        return False
    dot = shutil.which("dot")
    if dot is None:
        raise ConfigurationError(
            f"Graphviz's `dot` is not installed here, so veglia cannot draw {output}. Install "
            "Graphviz (`apt-get install graphviz`, `brew install graphviz` or `conda install "
            f"graphviz`), or write the dot text instead: `-o {output.with_suffix('.dot')}`."
        )
    try:
        result = subprocess.run(
            [dot, f"-T{fmt}", "-o", str(output)],
            input=text.encode(),
            capture_output=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        raise ConfigurationError(
            f"Graphviz's dot took over 300 s to draw {output}; draw less (a smaller --depth), "
            f"or write the dot text with `-o {output.with_suffix('.dot')}`."
        ) from None
    if result.returncode != 0:
        error = result.stderr.decode(errors="replace").strip().splitlines()
        raise ConfigurationError(
            f"Graphviz's dot could not draw {output}: {error[-1] if error else 'no message'} "
            f"(exit {result.returncode}). Write the dot text with "
            f"`-o {output.with_suffix('.dot')}` to look at it."
        )
    return True
