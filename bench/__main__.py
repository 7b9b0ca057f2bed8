"""``python -m bench``: provision, serve, drive with wrk, print the table."""

from bench.cli import main

if __name__ == "__main__":
    main()
