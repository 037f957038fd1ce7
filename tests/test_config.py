"""Cluster profiles in traitlets config are checked when they are set."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from betty_jupyter.config import BettyConfig


def test_first_profile_is_the_default_when_none_is_named():
    config = BettyConfig(clusters=[{"name": "a", "transport": "local"}, {"name": "b", "transport": "ssh", "host": "b"}])
    assert config.cluster_names == ["a", "b"]
    assert config.active_cluster == "a"


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ([{"transport": "ssh"}], "needs a `name`"),
        ([{"name": "a; rm -rf ~", "transport": "ssh"}], "needs a `name`"),
        ([{"name": "a", "transport": "telnet"}], "needs `transport`"),
        ([{"name": "a", "transport": "ssh", "host": "x"}, {"name": "a", "transport": "local"}], "defined twice"),
        ([{"name": "a", "transport": "ssh"}], "needs a `host`"),
        ([{"name": "a", "transport": "openssh"}], "uses openssh and needs a `host`"),
        ([{"name": "a", "transport": "openssh", "host": "-oProxyCommand=id"}], "not an option"),
        ([{"name": "a", "transport": "ssh", "host": "-J evil"}], "not an option"),
        ([{"name": "a", "transport": "openssh", "host": "h", "control_persist": "1d; id"}], "`control_persist` is a time"),
        ([{"name": "a", "transport": "local", "readable_roots": "/data"}], "must be a list of absolute paths"),
        ([{"name": "a", "transport": "local", "readable_roots": ["data"]}], "must be a list of absolute paths"),
        ([{"name": "a", "transport": "local", "colour": "red"}], "unknown fields: colour"),
    ],
)
def test_bad_profiles_are_refused_with_the_reason(profiles, message):
    with pytest.raises(TraitError, match=message):
        BettyConfig(clusters=profiles)
