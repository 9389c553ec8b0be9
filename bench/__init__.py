"""okl's benchmarks: each module runs as ``python -m bench.NAME`` from the repository root
(``make bench`` runs every ``bench_*`` one); none is a timed test."""
