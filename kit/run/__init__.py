"""Running a recipe: plan the runs, launch each through a runtime, keep every result, rerun bundles."""
