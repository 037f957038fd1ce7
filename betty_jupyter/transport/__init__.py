"""How Betty reaches a cluster: the one small interface (:mod:`.interface`) and each way that implements it (paramiko
``ssh``, the system's ``openssh``, ``local`` when Jupyter runs on the cluster, a ``scripted`` one for fast tests),
the questions a login asks a person, and the link a shared cluster keeps.

It knows nothing of Slurm: :mod:`betty_jupyter.cluster` stands on it. Nothing here imports Jupyter; paramiko loads
only when the ``ssh`` transport is used.
"""
