"""Compiled programs on disk, under the name the optimizers and the CLI have always used.

The format belongs to the programs: `teammed.programs.persist` writes and checks it (every
program's ``save``/``load``), `teammed.programs.load` rebuilds a program from a file. This
module re-exports both, so ``from teammed.optimizers.saved import load_program`` keeps working.
"""

from __future__ import annotations

from teammed.programs.load import load_program
from teammed.programs.persist import (
    ENVELOPE,
    FORMAT,
    OVERRIDABLE,
    check_state,
    describe_config,
    read_program,
    save_program,
    saved_config,
    system_of,
)

__all__ = [
    "FORMAT",
    "ENVELOPE",
    "OVERRIDABLE",
    "save_program",
    "load_program",
    "read_program",
    "saved_config",
    "describe_config",
    "check_state",
    "system_of",
]
