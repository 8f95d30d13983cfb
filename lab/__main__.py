"""`python -m lab`: the lab's command line (lab/cli.py)."""

from lab.cli import main

if __name__ == "__main__":
    main()
