// Command sample-processor is a minimal record processor for kcl-daemon. It logs where each record
// came from and how big it is (never its payload, which may be sensitive), and checkpoints after
// every batch and when the shard ends or the worker shuts down.
//
// Build it in this directory with `go build -o bin/sample-processor .`, then run
// `kcl-daemon --properties app.properties` from here too.
package main

import (
	"errors"
	"log"
	"time"

	"kcl-daemon.local/kcl"
)

const (
	checkpointAttempts = 5
	firstBackoff       = 500 * time.Millisecond
)

type processor struct {
	shardID string
}

func (p *processor) Initialize(in kcl.InitializeInput) error {
	p.shardID = in.ShardID
	log.Printf("%s: starting after %s", p.shardID, in.SequenceNumber)
	return nil
}

func (p *processor) ProcessRecords(in kcl.ProcessRecordsInput) error {
	if len(in.Records) == 0 {
		return nil
	}
	bytes := 0
	for _, r := range in.Records {
		bytes += len(r.Data) // your processing goes here
	}
	first := in.Records[0]
	log.Printf("%s: %d record(s), %d bytes, first record partitionKey=%q sequenceNumber=%s/%d",
		p.shardID, len(in.Records), bytes, first.PartitionKey, first.SequenceNumber, first.SubSequenceNumber)
	_ = in.Channel.Metric("sample_batch_records", float64(len(in.Records)), "Count", nil)
	return p.checkpoint(in.Checkpointer)
}

func (p *processor) LeaseLost() error {
	log.Printf("%s: lease lost", p.shardID)
	return nil
}

func (p *processor) ShardEnded(in kcl.ShardEndedInput) error {
	log.Printf("%s: shard ended", p.shardID)
	return p.checkpoint(in.Checkpointer)
}

func (p *processor) ShutdownRequested(in kcl.ShutdownRequestedInput) error {
	log.Printf("%s: shutdown requested", p.shardID)
	return p.checkpoint(in.Checkpointer)
}

// checkpoint marks everything delivered so far as processed, retrying throttling and transient
// DynamoDB failures with exponential backoff.
func (p *processor) checkpoint(c *kcl.Checkpointer) error {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := c.Checkpoint()
		var ce *kcl.CheckpointError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce) && ce.Name == "ShutdownException":
			log.Printf("%s: lease lost, not checkpointing", p.shardID)
			return nil
		case errors.As(err, &ce) && ce.Retriable() && attempt < checkpointAttempts:
			log.Printf("%s: %s, retrying in %s", p.shardID, ce.Name, backoff)
			time.Sleep(backoff)
			backoff *= 2
		default:
			return err
		}
	}
}

func main() {
	kcl.Run(&processor{})
}
