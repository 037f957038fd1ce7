"""A real one-node Slurm cluster on this machine, for tests, the demo and Binder.

``betty dev-cluster up`` starts munge, MariaDB, slurmdbd, slurmctld, slurmd and an OpenSSH
server on 127.0.0.1, all from Debian packages, with every generated file under one state
directory. Every daemon runs as the user who starts it: root on a test machine, the
notebook user on Binder, where the cluster runs that user's jobs only. Only the standard
library is used here, so it runs before Betty's dependencies are installed.
"""

from .cluster import DevCluster, default_port_base, default_state_dir
from .layout import DevClusterLayout

__all__ = ["DevCluster", "DevClusterLayout", "default_port_base", "default_state_dir"]
