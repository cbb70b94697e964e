package kcl

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Checkpointer records progress in the lease table, through the daemon. Each call writes a request
// and blocks until the daemon answers. It is valid only until the handler it was passed to returns;
// later calls fail with InvalidStateException without contacting the daemon. Calls from several
// goroutines are serialized.
type Checkpointer struct {
	s      conn
	mu     sync.Mutex
	closed bool
}

// Checkpoint marks every record delivered so far as processed. In ShardEnded it checkpoints the end
// of the shard.
func (c *Checkpointer) Checkpoint() error {
	return c.checkpoint(checkpointRequest{Action: "checkpoint"})
}

// CheckpointRecord marks r and every record before it as processed.
func (c *Checkpointer) CheckpointRecord(r Record) error {
	return c.CheckpointAt(r.SequenceNumber, r.SubSequenceNumber)
}

// CheckpointAt marks the record at (seq, subSeq) and everything before it as processed. subSeq is 0
// unless the record came out of a KPL aggregate.
func (c *Checkpointer) CheckpointAt(seq string, subSeq int64) error {
	return c.checkpoint(checkpointRequest{Action: "checkpoint", SequenceNumber: &seq, SubSequenceNumber: &subSeq})
}

func (c *Checkpointer) checkpoint(req checkpointRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return &CheckpointError{Name: "InvalidStateException"}
	}
	if err := c.s.write(req); err != nil {
		return err
	}
	reply, err := c.s.next() // the daemon answers before it sends anything else
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("kcl: stdin closed while waiting for a checkpoint reply: %w", io.ErrUnexpectedEOF)
	}
	if err != nil {
		return err
	}
	if reply.Action != "checkpoint" {
		return fmt.Errorf("kcl: expected a checkpoint reply, the daemon sent %q", reply.Action)
	}
	if reply.Error != nil && *reply.Error != "" {
		return &CheckpointError{Name: *reply.Error}
	}
	return nil
}

// close ends the checkpointer's validity, waiting for a checkpoint in flight on another goroutine.
func (c *Checkpointer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// CheckpointError is a checkpoint the daemon refused. Name is the Java exception's simple name:
//
//   - ThrottlingException: the lease table is throttled; retry after a pause.
//   - KinesisClientLibDependencyException: a transient DynamoDB or SDK failure; retry.
//   - ShutdownException: this worker no longer holds the lease; stop checkpointing.
//   - InvalidStateException: no checkpoint is possible now (also returned, locally, by a
//     Checkpointer used after its handler returned).
//   - IllegalArgumentException: the position is malformed, before the last checkpoint, or beyond
//     the last record delivered.
type CheckpointError struct {
	Name string
}

func (e *CheckpointError) Error() string {
	return "kcl: checkpoint failed: " + e.Name
}

// Retriable reports whether the same checkpoint may succeed if tried again later.
func (e *CheckpointError) Retriable() bool {
	return e.Name == "ThrottlingException" || e.Name == "KinesisClientLibDependencyException"
}
