module kcl-daemon.local/tree-processor

go 1.19

require kcl-daemon.local/kcl v0.0.0

replace kcl-daemon.local/kcl => ../../clients/go
