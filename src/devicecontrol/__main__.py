"""``python -m devicecontrol``: the same command line as the ``devicecontrol`` script."""

from devicecontrol.cli import main

if __name__ == "__main__":
    main(prog_name="devicecontrol")
