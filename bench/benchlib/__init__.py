"""Modules of bench/run (the sluice vs nginx benchmark harness); see bench/README.md."""
