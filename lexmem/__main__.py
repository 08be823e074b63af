"""``python -m lexmem`` runs the command line."""

from lexmem.cli import main

main()
