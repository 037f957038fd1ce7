"""Betty's cluster layer: transports, the read-only command policy, the Slurm client, batch scripts.

Nothing here imports Jupyter; heavy libraries (paramiko, pandas) load only when used.
"""
