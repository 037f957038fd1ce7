"""Betty's Slurm layer: the read-only command policy, the Slurm client, batch scripts, the shared cluster object; it
reaches the cluster through :mod:`betty_jupyter.transport`.

Nothing here imports Jupyter; heavy libraries (paramiko, pandas) load only when used.
"""
