"""What every subcommand's exit status means, and how one that cannot do its job says why.

0  EXIT_OK        nothing at or above the threshold (diagnose), as good or better (compare)
1  EXIT_FINDINGS  something is (diagnose), the run is worse (compare)
2  EXIT_ERROR     the command could not do its job; one line on stderr
"""

from __future__ import annotations

import sys

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def fail(message: str) -> int:
    """The command could not do its job: one line on stderr, exit status 2."""
    print(f"tb-trainhealth: error: {message}", file=sys.stderr)
    return EXIT_ERROR
