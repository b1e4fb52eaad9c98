"""Where and in what order cells run: the sweep, the launcher (the only module that starts
processes: one child, torchrun, or srun + torchrun), the Slurm job script, and the bounded searches."""
