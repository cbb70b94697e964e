// Command conformance is the processor the golden transcripts in protocol/transcripts assume (see
// protocol/transcripts/README.md). A record whose data is "checkpoint" is checkpointed; one whose
// data is "checkpoint-batch" checkpoints everything delivered so far; shardEnded and
// shutdownRequested checkpoint with no position. A throttled checkpoint is retried once, at once.
// "log" and "metric" use kcl-daemon's log/metric channel; "dead-letter" hands the record to the
// dead-letter destination (reason "conformance") when the daemon offered it.
package main

import (
	"errors"
	"log"

	"kcl-daemon.local/kcl"
)

type processor struct{}

func (processor) Initialize(kcl.InitializeInput) error { return nil }

func (processor) ProcessRecords(in kcl.ProcessRecordsInput) error {
	for _, r := range in.Records {
		switch string(r.Data) {
		case "checkpoint":
			checkpoint(func() error { return in.Checkpointer.CheckpointRecord(r) })
		case "checkpoint-batch":
			checkpoint(in.Checkpointer.Checkpoint)
		case "log":
			_ = in.Channel.Log("info", "log")
		case "metric":
			_ = in.Channel.Metric("conformance", 1, "Count", map[string]string{"source": "transcript"})
		case "dead-letter":
			_, _ = in.Channel.DeadLetter(r, "conformance")
		}
	}
	return nil
}

func (processor) LeaseLost() error { return nil }

func (processor) ShardEnded(in kcl.ShardEndedInput) error {
	checkpoint(in.Checkpointer.Checkpoint)
	return nil
}

func (processor) ShutdownRequested(in kcl.ShutdownRequestedInput) error {
	checkpoint(in.Checkpointer.Checkpoint)
	return nil
}

func checkpoint(try func() error) {
	err := try()
	var ce *kcl.CheckpointError
	if errors.As(err, &ce) && ce.Name == "ThrottlingException" {
		err = try()
	}
	if err != nil {
		log.Printf("conformance: %v", err)
	}
}

func main() {
	kcl.RunFactory(func() kcl.RecordProcessor { return processor{} })
}
