// Command tree-processor is the decoding processor of bench/process_tree.py on the project's Go client
// (kcl-daemon-go and kcl-daemon-go-lanes): it json-parses every record's payload (the client has
// base64-decoded it), adds up one field, checkpoints at the end of each batch and appends one line per
// batch to BENCH_BATCH_LOG ("<shard> <start epoch s> <end epoch s> <records>"), as tree_processor.py
// does. It runs with kcl.RunFactory, so kcl-daemon's offer of lanes is taken when made.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"kcl-daemon.local/kcl"
)

var (
	logMu   sync.Mutex
	logFile *os.File
)

type payload struct {
	Amount float64 `json:"amount"`
}

type decoding struct {
	shard string
	total float64
}

func (d *decoding) Initialize(in kcl.InitializeInput) error {
	d.shard = in.ShardID
	return nil
}

func (d *decoding) ProcessRecords(in kcl.ProcessRecordsInput) error {
	start := time.Now()
	var total float64
	for _, r := range in.Records {
		var p payload
		if err := json.Unmarshal(r.Data, &p); err != nil {
			return err
		}
		total += p.Amount
	}
	d.total += total
	if len(in.Records) > 0 {
		if err := in.Checkpointer.Checkpoint(); err != nil {
			return err
		}
	}
	line := fmt.Sprintf("%s %.6f %.6f %d\n", d.shard, seconds(start), seconds(time.Now()), len(in.Records))
	logMu.Lock()
	defer logMu.Unlock()
	_, err := logFile.WriteString(line)
	return err
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func (d *decoding) LeaseLost() error { return nil }

func (d *decoding) ShardEnded(in kcl.ShardEndedInput) error { return in.Checkpointer.Checkpoint() }

func (d *decoding) ShutdownRequested(in kcl.ShutdownRequestedInput) error {
	return in.Checkpointer.Checkpoint()
}

func main() {
	var err error
	logFile, err = os.OpenFile(os.Getenv("BENCH_BATCH_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		kcl.Logger.Fatal(err)
	}
	kcl.RunFactory(func() kcl.RecordProcessor { return &decoding{shard: "?"} })
}
