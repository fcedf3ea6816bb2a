module streamq.local/kind/kindnet

go 1.22
