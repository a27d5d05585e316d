"""What a run executes in: no container, a Docker container, Apptainer, pyxis/enroot.

Every placement uses these: this machine (kit.runtime.local), several Docker daemons
(kit.run.multinode) and Slurm (kit.run.slurm). A new container engine is one class here.
"""
