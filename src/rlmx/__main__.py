"""`python -m rlmx`: the same command line as `rlmx`."""

from rlmx.cli import main

if __name__ == "__main__":
    main()
