"""Betty's configuration, shared by every host (server extension, magics, CLI).

It is ordinary traitlets configuration under the ``BettyConfig`` section, read from
Jupyter's config directories (``jupyter_server_config.json`` and
``jupyter_server_config.d/*.json``), from the server's own config when Betty runs inside
Jupyter, and last from the file named by ``$BETTY_CONFIG``. Cluster profiles from all of
them are merged by name (a later file's profile replaces an earlier one of that name).

The site's policy (:mod:`betty_jupyter.agent.site`) is read first, once, and rides on the
configuration as :attr:`BettyConfig.site`: its model setting lies under the person's, and each
cluster profile's readable roots are narrowed to the site's.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from jupyter_core.paths import ENV_CONFIG_PATH, SYSTEM_CONFIG_PATH, jupyter_config_dir, jupyter_config_path
from traitlets import Dict, List, TraitError, Unicode, validate
from traitlets.config import Config, Configurable

from .agent.site import SitePolicy, find_policy, load_policy, trusted_file
from .cluster.profiles import ClusterProfile
from .errors import ConfigError

USER_CLUSTERS_FILE = "betty_clusters.json"
USER_LLM_FILE = "betty_llm.json"


class BettyConfig(Configurable):
    """Settings every Betty host reads: the clusters it may talk to and which one is the default."""

    clusters = List(
        Dict(),
        default_value=[],
        help=(
            "Cluster profiles: dicts with `name`, `transport` ('ssh' or 'local'), and for ssh a `host` "
            "alias from an ssh config file; optional `user`, `ssh_config`, `readable_roots`, `work_dir`, "
            "`extra_commands`, `gss_auth`, `env` (for Slurm's commands), `job_env` (variable names jobs get "
            "beyond Betty's own list; never a secret's), `environments` (named environments for %%betty run)."
        ),
    ).tag(config=True)

    default_cluster = Unicode(
        None,
        allow_none=True,
        help="Name of the cluster used when none is given; the first profile when unset.",
    ).tag(config=True)

    llm = Dict(
        default_value={},
        help=(
            "The chat model: `base_url` (any OpenAI-compatible server: OpenAI, vLLM, Ollama, llama.cpp), "
            "`model`, the server's own key from `api_key_env` (a variable) or `api_key_file` (a file; "
            "$OPENAI_API_KEY is sent to OpenAI only), optional `summary_model`, `max_iterations`, "
            "`max_tokens`, `timeout`, `max_retries`, `reply_tokens` (the most one reply may take, default 1024), "
            "`tool_choice` (send tool_choice \"auto\", default true), `temperature` (default 0.2 for servers other than "
            "OpenAI's; null leaves it to the server), `context_tokens` (the server's context, so "
            "history is condensed before it fills it), `offer_tools` ('core', the default: a small core of tools "
            "first and `more_tools` for the rest; 'all': every tool from the first request), `planner` (a setting "
            "like this one for a model that plans each turn, which this model then carries out). "
            "`betty llm check` says whether a server gives Betty what it needs."
        ),
    ).tag(config=True)

    rules = Dict(
        default_value={},
        help="Approval rules: lists `deny`, `ask`, `allow` of `tool` or `tool(arg=glob)` patterns.",
    ).tag(config=True)

    notify = Dict(
        default_value={},
        help=(
            "Word when jobs end (docs/notifications.md): the site's mail relay as `smtp` ('host:port'), `from` "
            "(the sender's address), optional `user` with `password_file`, `starttls`. The targets themselves "
            "are the person's own (`betty notify add`)."
        ),
    ).tag(config=True)

    def __init__(self, *args: Any, site: SitePolicy | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.site: SitePolicy = site or SitePolicy()
        """The site's policy, read before this configuration; nothing here loosens it."""

    @validate("clusters")
    def _check_clusters(self, proposal: dict[str, Any]) -> list[dict[str, Any]]:
        profiles: list[dict[str, Any]] = proposal["value"]
        seen: set[str] = set()
        for data in profiles:
            try:
                profile = ClusterProfile.from_dict(data)
            except ConfigError as error:
                raise TraitError(str(error)) from error
            if profile.name in seen:
                raise TraitError(f"cluster profile {profile.name!r} is defined twice")
            seen.add(profile.name)
        return profiles

    def take_clusters(self, newer: "BettyConfig") -> bool:
        """Take ``newer``'s cluster profiles and default cluster (a configuration re-read); whether they changed.

        Only the clusters are taken: the model, the rules and the mode stay as the host started with them.
        """
        changed = (self.clusters, self.default_cluster) != (newer.clusters, newer.default_cluster)
        if changed:
            self.clusters, self.default_cluster = newer.clusters, newer.default_cluster
        return changed

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

    def profile(self, name: str | None = None) -> ClusterProfile:
        """The profile called ``name`` (default: :attr:`active_cluster`)."""
        wanted = name or self.active_cluster
        if wanted is None:
            raise ConfigError("no cluster is configured; add one with `betty cluster add NAME --host ALIAS`")
        for data in self.clusters:
            if data["name"] == wanted:
                profile = ClusterProfile.from_dict(data)
                roots = self.site.narrow_roots(profile.readable_roots)
                return profile if roots == profile.readable_roots else replace(profile, readable_roots=roots)
        raise ConfigError(f"no cluster called {wanted!r}; configured: {', '.join(self.cluster_names) or 'none'}")


def config_files() -> list[Path]:
    """Every JSON file Betty reads, in the order it reads them."""
    files: list[Path] = []
    for directory in reversed(jupyter_config_path()):  # system first, the user's own last
        base = Path(directory)
        files.append(base / "jupyter_server_config.json")
        files.extend(sorted((base / "jupyter_server_config.d").glob("*.json")))
    explicit = os.environ.get("BETTY_CONFIG")
    if explicit:
        files.append(Path(explicit))
    return [path for path in files if path.is_file()]


def config_signature() -> tuple[tuple[str, int, int], ...]:
    """What Betty's configuration files are now: each one's path, modification time and size.

    It changes when a file is written (``betty cluster add``), added or removed, so a
    long-running host re-reads its configuration only when this differs from the last one.
    """
    signature = []
    for path in config_files():
        try:
            found = path.stat()
        except OSError:  # removed between the listing and now: the next look sees it gone
            continue
        signature.append((str(path), found.st_mtime_ns, found.st_size))
    return tuple(signature)


def site_config_dirs() -> list[Path]:
    """The system-wide Jupyter configuration folders, where a site may name its policy file."""
    return [Path(directory) for directory in [*ENV_CONFIG_PATH, *SYSTEM_CONFIG_PATH]]


def named_site_policy() -> str | None:
    """The policy file a system-wide Jupyter configuration names (``{"Betty": {"site_policy": …}}``), or None.

    Only a configuration file that is the site's alone counts (:func:`~betty_jupyter.agent.site.trusted_file`):
    one the person could write could name any file.
    """
    named = None
    for base in reversed(site_config_dirs()):  # the last one read wins, as Jupyter's own order
        for path in [base / "jupyter_server_config.json", *sorted((base / "jupyter_server_config.d").glob("*.json"))]:
            if not path.is_file() or not trusted_file(path):
                continue
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot read the site's Jupyter configuration {path}: {exc}") from exc
            section = data.get("Betty") if isinstance(data, dict) else None
            if isinstance(section, dict) and section.get("site_policy"):
                if not isinstance(section["site_policy"], str) or not section["site_policy"].startswith("/"):
                    raise ConfigError(f"{path}: Betty.site_policy is the policy file's absolute path")
                named = section["site_policy"]
    return named


def site_policy() -> SitePolicy:
    """The site's policy, read now (ConfigError naming the file when it is broken or not the site's)."""
    return load_policy(find_policy(named_site_policy()))


def load_config(server_config: Config | None = None, site: SitePolicy | None = None) -> BettyConfig:
    """Betty's configuration from Jupyter's config files, the server's config and ``$BETTY_CONFIG``, under the site's
    policy (read first, unless ``site`` hands over the one already read)."""
    site = site_policy() if site is None else site
    sections = [_betty_section(path) for path in config_files()]
    if server_config is not None and "BettyConfig" in server_config:
        sections.insert(len(sections) - (1 if os.environ.get("BETTY_CONFIG") else 0),
                        dict(server_config["BettyConfig"]))
    merged: dict[str, dict[str, Any]] = {}
    default: str | None = None
    llm: dict[str, Any] = {}
    rules: dict[str, Any] = {}
    notify: dict[str, Any] = {}
    for section in sections:
        for profile in section.get("clusters", []):
            merged[profile.get("name")] = profile
        default = section.get("default_cluster", default)
        llm.update(section.get("llm", {}))
        rules.update(section.get("rules", {}))
        notify.update(section.get("notify", {}))
    try:
        return BettyConfig(clusters=list(merged.values()), default_cluster=default, llm=_under_site(site, llm),
                           rules=rules, site=site, notify=notify)
    except TraitError as error:
        raise ConfigError(str(error)) from error


def _under_site(site: SitePolicy, llm: dict[str, Any]) -> dict[str, Any]:
    """The person's model setting over the site's default; the site's key stays with the site's server."""
    base = dict(site.llm_default)
    if str(llm.get("base_url") or base.get("base_url") or "").rstrip("/") != str(base.get("base_url") or "").rstrip("/"):
        base = {name: value for name, value in base.items() if name not in ("api_key_env", "api_key_file")}
    return {**base, **llm}


def beyond_files(server_config: Config | None) -> Config | None:
    """What the server's own ``BettyConfig`` says beyond Betty's configuration files as they are now.

    Jupyter reads the same files into the server's config when it starts; re-reading the files
    later must not let those start-up copies override what the files say since (a profile
    replaced with ``betty cluster add``). What remains is what only the server was given: its
    command line, a test's or a spawner's config.
    """
    if server_config is None or "BettyConfig" not in server_config:
        return server_config
    sections = [_betty_section(path) for path in config_files()]
    in_files = [profile for section in sections for profile in section.get("clusters", [])]
    own = dict(server_config["BettyConfig"])
    own["clusters"] = [profile for profile in own.get("clusters", []) if profile not in in_files]
    if any(own.get("default_cluster") == section.get("default_cluster") for section in sections):
        own.pop("default_cluster", None)
    return Config({"BettyConfig": own})


def _betty_section(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read Betty's configuration from {path}: {exc}") from exc
    section = data.get("BettyConfig", {}) if isinstance(data, dict) else {}
    return section if isinstance(section, dict) else {}


def user_clusters_file() -> Path:
    """Where ``betty cluster add`` keeps the person's own cluster profiles."""
    return Path(jupyter_config_dir()) / "jupyter_server_config.d" / USER_CLUSTERS_FILE


def user_llm_file() -> Path:
    """Where the person's own chat-model setting lives (``betty llm serve`` writes it), beside their clusters."""
    return Path(jupyter_config_dir()) / "jupyter_server_config.d" / USER_LLM_FILE


def save_user_cluster(profile: ClusterProfile, make_default: bool = False) -> Path:
    """Add or replace ``profile`` in :func:`user_clusters_file`; other profiles stay as they are."""
    path = user_clusters_file()
    section = _betty_section(path) if path.exists() else {}
    profiles = [p for p in section.get("clusters", []) if p.get("name") != profile.name]
    section["clusters"] = [*profiles, profile.to_dict()]
    if make_default:
        section["default_cluster"] = profile.name
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps({"BettyConfig": section}, indent=2) + "\n")
    os.replace(temp, path)
    return path
