module kcl-daemon.local/kcl

go 1.19
