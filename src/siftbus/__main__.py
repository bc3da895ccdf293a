"""``python -m siftbus`` runs the CLI."""

from siftbus.cli import main

main()
