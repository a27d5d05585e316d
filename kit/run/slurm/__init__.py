"""Slurm as a batch runtime: an sbatch script runs the plan on the allocation; collect reads it back."""
