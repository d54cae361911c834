"""Entry point: ``python -m server.scripted --help``."""

from server.scripted.app import main

if __name__ == "__main__":
    main()
