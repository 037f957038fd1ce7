"""Is a cluster usable now? Reach it, check its host key, and ask Slurm one read: one line that says why not.

The panel's status dot asks this every so often, so it is one cheap read (``sinfo`` listing
the partition names) over the connection the cluster already has, and it changes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import BettyError, CommandTimeout, ConfigError, HostKeyError, LinkProblem, TransportError
from .allowlist import CommandPolicy
from ..transport.interface import Transport

HEALTH_READ = ("sinfo", "-h", "-o", "%P")
"""The read that asks Slurm whether it answers (its controller must answer for ``sinfo`` to list anything)."""


@dataclass(frozen=True)
class ClusterHealth:
    """What a health check found: ``ok``, or the ``problem`` and one line (``message``) naming its cause."""

    cluster: str
    ok: bool
    message: str
    problem: LinkProblem | None = None
    fingerprint: str | None = None
    checked_at: float = 0.0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready (the server's ``ClusterHealth`` answer)."""
        found: dict[str, object] = {"cluster": self.cluster, "ok": self.ok, "message": self.message,
                                    "problem": self.problem.value if self.problem else None,
                                    "checked_at": self.checked_at}
        if self.fingerprint:
            found["fingerprint"] = self.fingerprint
        return found


async def check_health(cluster: str, transport: Transport, policy: CommandPolicy,
                       timeout: float = 20.0) -> ClusterHealth:
    """Run :data:`HEALTH_READ` through ``policy`` on ``transport``; never raises a BettyError, it reports it."""
    now = time.time()
    try:
        answer = await transport.run(tuple(policy.check(HEALTH_READ).argv), timeout)
    except HostKeyError as error:
        return ClusterHealth(cluster, False, str(error), error.problem, error.fingerprint, now)
    except CommandTimeout:
        return ClusterHealth(cluster, False, f"{cluster} is reachable but Slurm did not answer `sinfo` within "
                                             f"{timeout:g} s; is slurmctld up?", LinkProblem.SLURM, checked_at=now)
    except TransportError as error:
        return ClusterHealth(cluster, False, str(error), error.problem, checked_at=now)
    except ConfigError as error:
        return ClusterHealth(cluster, False, str(error), LinkProblem.CONFIG, checked_at=now)
    except BettyError as error:
        return ClusterHealth(cluster, False, str(error), LinkProblem.LINK, checked_at=now)
    if not answer.ok:
        said = [line.strip() for line in answer.stderr.splitlines() if line.strip()]
        why = said[-1] if said else f"`sinfo` exited with {answer.exit_code}"
        return ClusterHealth(cluster, False, f"{cluster} is reachable but Slurm does not answer: {why[:300]}",
                             LinkProblem.SLURM, checked_at=now)
    partitions = [line.strip() for line in answer.stdout.splitlines() if line.strip()]
    return ClusterHealth(cluster, True, f"{cluster}: reachable, Slurm answers ({len(partitions)} "
                                        f"partition{'' if len(partitions) == 1 else 's'}, {answer.duration_ms:.0f} ms)",
                         checked_at=now)
