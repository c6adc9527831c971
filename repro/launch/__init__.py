"""Where the units of a `repro run` execute: `slurm` (a job array on a Slurm cluster, through submitit) and
`unit` (one unit in a process of its own, or one rank of it under torchrun). The local launcher is
`repro.run.execute`."""
