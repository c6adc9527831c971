"""Where the units of a `repro run` execute. `units`: the (row, seed) units of a plan, shared by the
launchers; `local`: this machine (`execute`); `slurm`: a job array on a Slurm cluster, through submitit;
`unit`: one unit in a process of its own, or one rank of it under torchrun."""
