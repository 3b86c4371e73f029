"""Slurm mode: hwagent's view of the node written in Slurm's terms (docs/slurm.md).

Pure functions over the ``Topology`` and ``Inventory`` the rest of hwagent reads:
``cores`` numbers cores as Slurm does, ``nodeconf`` writes the slurm.conf node line
and ``gres`` the gres.conf lines. The command (``hwagent slurm conf``) only reads
the files and prints.
"""
