"""``python -m fedlib <command>`` from a checkout of the repository: the reproduction's command line
(``python -m repro``, :mod:`repro.cli`).  The library has no commands of its own; this entry point is the only
place it names the reproduction, and it imports it only when run."""

import sys

if __name__ == "__main__":
    try:
        from repro.cli import main
    except ModuleNotFoundError as e:
        if e.name != "repro":
            raise
        sys.exit(
            "python -m fedlib: its commands (run, sweep, paper, gpu-check, ...) are the reproduction's, which runs "
            "from a checkout of the repository: run `python -m repro <command>` (or this command) from its root."
        )
    sys.exit(main())
