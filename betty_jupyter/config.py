"""Betty's configuration, shared by every host (server extension, magics, CLI).

It is ordinary traitlets configuration, so it can live in ``jupyter_server_config.py``/``.json``
or be passed on the command line (``--BettyConfig.default_cluster=betty-dev``).
"""

from __future__ import annotations

import re
from typing import Any

from traitlets import Dict, List, TraitError, Unicode, validate
from traitlets.config import Configurable

_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class BettyConfig(Configurable):
    """Settings every Betty host reads: the clusters it may talk to and which one is the default."""

    clusters = List(
        Dict(),
        default_value=[],
        help=(
            "Cluster profiles: dicts with at least `name` and `transport` ('ssh' or 'local'); "
            "ssh profiles name a `host` alias from an ssh config file."
        ),
    ).tag(config=True)

    default_cluster = Unicode(
        None,
        allow_none=True,
        help="Name of the cluster used when none is given; the first profile when unset.",
    ).tag(config=True)

    @validate("clusters")
    def _check_clusters(self, proposal: dict[str, Any]) -> list[dict[str, Any]]:
        profiles: list[dict[str, Any]] = proposal["value"]
        seen: set[str] = set()
        for profile in profiles:
            name = profile.get("name")
            if not isinstance(name, str) or not _CLUSTER_NAME.match(name):
                raise TraitError(f"cluster profile {profile!r} needs a `name` of letters, digits, . _ -")
            if name in seen:
                raise TraitError(f"cluster profile {name!r} is defined twice")
            if profile.get("transport") not in ("ssh", "local"):
                raise TraitError(f"cluster profile {name!r} needs `transport` 'ssh' or 'local'")
            seen.add(name)
        return profiles

    @property
    def cluster_names(self) -> list[str]:
        """Names of the configured clusters, in configuration order."""
        return [profile["name"] for profile in self.clusters]

    @property
    def active_cluster(self) -> str | None:
        """The cluster used when none is named: ``default_cluster`` or the first profile."""
        if self.default_cluster:
            return self.default_cluster
        names = self.cluster_names
        return names[0] if names else None
