module ldp-marginals/benchmarks/loadgen

go 1.22
