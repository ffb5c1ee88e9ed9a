"""``python -m teammed``: the ``teammed`` command."""

from teammed.cli import console_main

if __name__ == "__main__":
    console_main()
