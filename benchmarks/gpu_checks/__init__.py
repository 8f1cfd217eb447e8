"""The parts of benchmarks/gpu_check.py: pure comparisons, child processes and the checks that combine them."""
