module streamq.local/kind/capshim

go 1.22
