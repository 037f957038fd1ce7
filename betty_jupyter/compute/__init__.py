"""What runs on a compute node for a person: a notebook cell (``%%betty run``) or a whole notebook
(``betty submit-notebook``) as a batch job — what crosses the wire, the program that runs it there, and what comes
back, in folders of the person's own.

It stands on Slurm (:mod:`betty_jupyter.cluster`) and the transports (:mod:`betty_jupyter.transport`).
"""
