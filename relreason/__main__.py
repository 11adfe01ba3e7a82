"""`python -m relreason ...` (and `torchrun ... -m relreason train ...`): the same CLI as `relreason`."""

from relreason.cli.main import main

if __name__ == "__main__":
    main()
