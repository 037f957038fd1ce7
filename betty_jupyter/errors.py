"""Betty's errors: one hierarchy, so every face can turn any of them into one clear line.

::

    BettyError                  anything Betty raises on purpose; str(error) is the one line a person sees
    ├── ConfigError             Betty's configuration is missing or wrong
    ├── TransportError          a command could not be carried to the cluster or back (its ``problem`` says why)
    │   ├── HostKeyError            the cluster's host key is unknown or does not match
    │   └── CommandTimeout          a command ran past its time limit
    ├── PolicyError             a command is not on the read-only allowlist
    ├── SiteRefusal             the site's policy does not allow what was asked (the message names the field)
    ├── SlurmError              Slurm refused or failed a request
    │   └── SubmissionUnknownError  a submission's outcome could not be established
    ├── ScriptError             a batch script is malformed or asks for what the cluster lacks
    ├── DevClusterError         the local development cluster could not be brought up or down
    │   ├── MissingPackagesError    Debian packages it needs are not installed (and cannot be)
    │   └── PortInUseError          a port it wants is held by another program
    ├── GpuEstimateError        a GPU memory estimate was asked for an unknown model or an impossible setup
    ├── WikiError               a wiki page name, page or write was refused (the message names the rule)
    ├── ExperimentError         an experiment record could not be written or found
    ├── ModelError              the chat model could not be reached, or refused the request
    ├── ToolError               an agent tool call was refused or failed
    ├── SchemaError             a JSON schema is malformed or refers to something outside itself
    ├── ApprovalError           an answer to an approval request was refused
    ├── ActionLogError          the action log could not be written or read
    ├── UsageError              a command was called with arguments it does not take
    └── CellRunError            a notebook cell run on the cluster raised (its traceback came back)

Foreign exceptions (``subprocess``, ``OSError``, …) are translated into these once, at the
boundary where they happen, with ``raise … from exc``.
"""

from __future__ import annotations

import shlex

from enum import Enum


class LinkProblem(str, Enum):
    """Why a cluster could not be used, as a word a front-end can key on (a TransportError's ``problem``)."""

    HOST_UNKNOWN = "host-unknown"
    """The host name does not resolve (DNS)."""
    REFUSED = "refused"
    """The host answered, but nothing listens on the SSH port."""
    NO_ANSWER = "no-answer"
    """The host did not answer in time."""
    HOST_KEY_UNKNOWN = "host-key-unknown"
    """known_hosts has no key for the host yet."""
    HOST_KEY_CHANGED = "host-key-changed"
    """The host presents another key than the one known_hosts recorded."""
    LOGIN = "login"
    """The host refused to log the person in."""
    LINK = "link"
    """Any other failure of the link."""
    SLURM = "slurm"
    """The cluster was reached, but Slurm did not answer."""
    CONFIG = "config"
    """The cluster's profile cannot be used as it is."""


class BettyError(Exception):
    """Base of every error Betty raises on purpose; its message is one line for a person."""


class ConfigError(BettyError):
    """Betty's configuration is missing, malformed or contradicts itself."""


class TransportError(BettyError):
    """A command could not be carried to the cluster or its answer back (link down, auth failed).

    ``problem`` says which way it failed, where the boundary that raised it could tell.
    """

    def __init__(self, message: str, problem: LinkProblem = LinkProblem.LINK) -> None:
        super().__init__(message)
        self.problem = problem


class HostKeyError(TransportError):
    """The cluster's SSH host key is unknown (or changed); the person must confirm its fingerprint."""

    def __init__(self, host: str, key_type: str, fingerprint: str, known_hosts: str, changed: bool = False) -> None:
        self.host = host
        self.key_type = key_type
        self.fingerprint = fingerprint
        self.known_hosts = known_hosts
        self.changed = changed
        if changed:
            # `betty cluster trust` adds keys and never replaces one: the person removes the old key themselves.
            message = (f"{host} presented a DIFFERENT host key than the one recorded ({key_type} {fingerprint}); "
                       f"this can be an attack. Only if your cluster's staff say its key changed, remove the old "
                       f"one (`ssh-keygen -R {shlex.quote(host)} -f {shlex.quote(known_hosts)}`) and confirm the new fingerprint with "
                       f"`betty cluster trust`")
        else:
            message = (f"{host} has an unknown host key ({key_type} {fingerprint}); if you trust this fingerprint, "
                       f"add it with `betty cluster trust` (it is written to {known_hosts})")
        super().__init__(message, LinkProblem.HOST_KEY_CHANGED if changed else LinkProblem.HOST_KEY_UNKNOWN)


class CommandTimeout(TransportError):
    """A command ran past its time limit and was stopped."""


class PolicyError(BettyError):
    """A command is not on the read-only allowlist; the message says which rule refused it."""


class SiteRefusal(BettyError):
    """The site's policy (``/etc/betty/policy.json``) does not allow this; the message names what it allows."""


class SlurmError(BettyError):
    """Slurm refused or failed a request (the message carries Slurm's own words)."""


class SubmissionUnknownError(SlurmError):
    """The link dropped during ``sbatch`` and the submission could not be found or ruled out."""


class ScriptError(BettyError):
    """A batch script is malformed or asks for resources the cluster does not offer.

    ``problems`` keeps each problem with the script line it is on (1-based), so a face that
    shows the script under a line of its own (a ``%%betty submit`` cell) can name the lines
    as the person sees them (:meth:`numbered_from`); the message is the same list from line 1.
    """

    def __init__(self, message: str, problems: "tuple[tuple[int | None, str], ...]" = ()) -> None:
        super().__init__(message)
        self.problems = problems or ((None, message),)

    @classmethod
    def at(cls, *problems: "tuple[int | None, str]") -> "ScriptError":
        """The error for ``(line, problem)`` pairs: ``line 4: …; line 6: …``."""
        return cls(_numbered(problems, 1), tuple(problems))

    def numbered_from(self, first_line: int) -> str:
        """The problems, each named by its line when the script's first line is line ``first_line``."""
        return _numbered(self.problems, first_line)


def _numbered(problems: "tuple[tuple[int | None, str], ...]", first_line: int) -> str:
    return "; ".join(message if line is None else f"line {line + first_line - 1}: {message}"
                     for line, message in problems)


class UsageError(BettyError):
    """A command or magic was called with arguments it does not take."""


class CellRunError(BettyError):
    """A ``%%betty run`` cell raised on the cluster; ``traceback`` is the cell's, as it came back (untrusted text)."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__(message)
        self.traceback = traceback


class GpuEstimateError(BettyError):
    """A GPU memory estimate names an unknown model, a malformed config or an impossible setup."""


class WikiError(BettyError):
    """A wiki page name, page or write was refused; the message names the rule that refused it."""


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


class ExperimentError(BettyError):
    """An experiment record could not be written, found or repaired (the message names the job)."""


class ModelError(BettyError):
    """The chat model could not be reached after retries, or refused the request (the message says which)."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        self.retryable = retryable
        super().__init__(message)


class ToolError(BettyError):
    """A tool call was refused or failed; ``str(error)`` is one line for the person and the model.

    ``details`` holds one line per problem (one per argument for malformed arguments).
    """

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or [message]


class SchemaError(BettyError):
    """A JSON schema Betty was given is malformed, or refers to something outside itself (nothing is fetched)."""


class ApprovalError(BettyError):
    """An answer to an approval was refused: unknown id, answered already, or malformed."""


class CardChangedError(ApprovalError):
    """An answer named (by its digest) another card than the one open: what the person saw is not what would run."""


class ActionLogError(BettyError):
    """The action log could not be written or read (the message names the file)."""
