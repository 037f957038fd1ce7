"""The cluster advisor: when and where a job would start, why a pending job waits, how much a job used of what it
asked for, and what the cluster is doing now.

Every answer is read from Slurm itself (``sbatch --test-only``, ``squeue --start``, ``sprio``, ``sshare``, ``sacct``,
``sinfo``) through the read policy, and every claim carries the figure it came from. Other users' jobs appear only
as counts, never by name.
"""
