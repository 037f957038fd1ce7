"""Betty's errors: one hierarchy, so every face can turn any of them into one clear line.

::

    BettyError                  anything Betty raises on purpose; str(error) is the one line a person sees
    ├── ConfigError             Betty's configuration is missing or wrong
    ├── DevClusterError         the local development cluster could not be brought up or down
    │   ├── MissingPackagesError    Debian packages it needs are not installed (and cannot be)
    │   └── PortInUseError          a port it wants is held by another program
    └── UsageError              a command was called with arguments it does not take

Foreign exceptions (``subprocess``, ``OSError``, …) are translated into these once, at the
boundary where they happen, with ``raise … from exc``.
"""

from __future__ import annotations


class BettyError(Exception):
    """Base of every error Betty raises on purpose; its message is one line for a person."""


class ConfigError(BettyError):
    """Betty's configuration is missing, malformed or contradicts itself."""


class UsageError(BettyError):
    """A command or magic was called with arguments it does not take."""


class DevClusterError(BettyError):
    """The local development cluster could not be brought up, checked or stopped."""


class MissingPackagesError(DevClusterError):
    """Debian packages the development cluster needs are missing and cannot be installed here."""

    def __init__(self, packages: list[str], reason: str) -> None:
        self.packages = packages
        listing = " ".join(packages)
        super().__init__(f"{reason}: run `sudo apt-get install -y {listing}` and try again")


class PortInUseError(DevClusterError):
    """A port the development cluster needs is held by another program."""

    def __init__(self, port: int, service: str) -> None:
        self.port = port
        self.service = service
        super().__init__(
            f"port {port} (for {service}) is already in use by another program; "
            "stop that program or pick other ports with `betty dev-cluster up --port-base N`"
        )
