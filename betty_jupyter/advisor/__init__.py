"""The cluster advisor: when and where a job would start, why a pending job waits, what a job should ask for next
time, and what the cluster is doing now.

It stands on Slurm (:mod:`betty_jupyter.cluster`) and on GPU memory (:mod:`betty_jupyter.gpu`), which know nothing
of each other or of it, and below every face (``tests/test_layers.py`` holds the rule).

Every answer is read from Slurm itself (``sbatch --test-only``, ``squeue --start``, ``sprio``, ``sshare``, ``sacct``,
``sinfo``) through the read policy, and every claim carries the figure it came from. Other users' jobs appear only
as counts, never by name.
"""
