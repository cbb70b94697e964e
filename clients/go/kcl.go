// Package kcl writes Kinesis record processors for kcl-daemon (or the Java KCL MultiLangDaemon).
//
// The daemon starts one process per shard and talks to it over stdin and stdout, one JSON message
// per line. Implement RecordProcessor and call Run from main:
//
//	func main() { kcl.Run(&myProcessor{}) }
//
// Or give RunFactory a function that makes one: under kcl-daemon's shardsPerChild one process then
// serves several shards, each with a processor of its own (see RunFactory).
//
// Stdout belongs to the protocol: log to stderr (the standard log package does by default), never
// with fmt.Print. The daemon copies every stderr line into its own log.
package kcl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// MaxLineSize is the longest line the client reads from the daemon, in bytes. A processRecords line
// for a full 10 MB GetRecords batch is about 14 MB (base64 plus JSON), so this leaves ample room.
// A longer line stops RunWith with an error.
const MaxLineSize = 64 << 20

// Logger receives everything the client logs: handler errors and panics, ignored actions. It writes
// to stderr; replace it to redirect or silence the client. It must never write to stdout.
var Logger = log.New(os.Stderr, "kcl: ", log.LstdFlags|log.Lmsgprefix)

// RecordProcessor handles one shard. The client calls one method at a time, in protocol order:
// Initialize, then ProcessRecords any number of times, then one of LeaseLost, ShardEnded or
// ShutdownRequested (which is followed by LeaseLost). An error or a panic from a method is logged
// and the daemon is still told the action is done: return errors for logging, not for control.
type RecordProcessor interface {
	Initialize(InitializeInput) error
	ProcessRecords(ProcessRecordsInput) error
	// LeaseLost: another worker owns the shard now. There is no checkpointer: do not checkpoint.
	LeaseLost() error
	// ShardEnded: the shard was fully read (split or merge). Call Checkpoint() before returning, or
	// the shard's children are never processed.
	ShardEnded(ShardEndedInput) error
	// ShutdownRequested: the worker is shutting down or handing the lease over; checkpoint now.
	ShutdownRequested(ShutdownRequestedInput) error
}

// InitializeInput describes the shard and the checkpoint processing starts after.
type InitializeInput struct {
	ShardID string
	// SequenceNumber is the lease's checkpoint: a sequence number, or TRIM_HORIZON, LATEST or
	// AT_TIMESTAMP for a shard never checkpointed. Empty if the daemon sent null.
	SequenceNumber    string
	SubSequenceNumber int64
	// StreamName is the shard's stream when kcl-daemon reads several (streamNames); empty otherwise.
	StreamName string
	// StreamIdentifier is that stream's accountId:streamName:creationEpoch; empty otherwise.
	StreamIdentifier string
}

// ProcessRecordsInput is one batch of records.
type ProcessRecordsInput struct {
	Records []Record
	// MillisBehindLatest is how far the batch is behind the tip of the shard; 0 if unknown.
	MillisBehindLatest int64
	Checkpointer       *Checkpointer
	// Channel is kcl-daemon's log/metric channel (see Channel); usable for the whole shard.
	Channel *Channel
}

// ShardEndedInput carries the checkpointer that must checkpoint the end of the shard.
type ShardEndedInput struct {
	Checkpointer *Checkpointer
}

// ShutdownRequestedInput carries the checkpointer for a last checkpoint before shutdown.
type ShutdownRequestedInput struct {
	Checkpointer *Checkpointer
}

// Record is one user record. Records de-aggregated from one KPL record share SequenceNumber and
// differ in SubSequenceNumber (0, 1, 2, ...); any other record has SubSequenceNumber 0.
type Record struct {
	Data                        []byte
	PartitionKey                string
	SequenceNumber              string
	SubSequenceNumber           int64
	ApproximateArrivalTimestamp time.Time
}

// Run serves the daemon on stdin and stdout until stdin closes, then returns. A protocol or I/O
// failure is logged and ends the process with status 1, which the daemon treats as fatal.
func Run(p RecordProcessor) {
	exitOnError(RunWith(p, os.Stdin, os.Stdout))
}

// RunWith serves the daemon on r and w. It returns nil when r reaches end of input, or an error for
// a line that is not valid protocol JSON, a line longer than MaxLineSize, or a failed write. Each
// message is written with a single Write call, then flushed if w has a Flush() error method.
func RunWith(p RecordProcessor, r io.Reader, w io.Writer) error {
	return serve(p, newSession(r, w))
}

func exitOnError(err error) {
	if err != nil {
		Logger.Print(err)
		os.Exit(1)
	}
}

// conn is one shard's conversation: the whole of stdin and stdout (a session), or one lane of them.
type conn interface {
	next() (*message, error)
	write(v interface{}) error
}

// serve answers one shard's actions on c until its input ends.
func serve(p RecordProcessor, c conn) error {
	channel := &Channel{s: c}
	for {
		msg, err := c.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var cp *Checkpointer
		var handle func() error
		switch msg.Action {
		case "initialize":
			in := InitializeInput{ShardID: msg.ShardID, StreamName: msg.StreamName, StreamIdentifier: msg.StreamIdentifier}
			channel.offered = map[string]bool{}
			for _, action := range msg.Channel {
				channel.offered[action] = true
			}
			if msg.SequenceNumber != nil {
				in.SequenceNumber = *msg.SequenceNumber
			}
			if msg.SubSequenceNumber != nil {
				in.SubSequenceNumber = *msg.SubSequenceNumber
			}
			handle = func() error { return p.Initialize(in) }
		case "processRecords":
			cp = &Checkpointer{s: c}
			in := ProcessRecordsInput{Records: make([]Record, len(msg.Records)), Checkpointer: cp, Channel: channel}
			for i, rec := range msg.Records {
				in.Records[i] = rec.record()
			}
			if msg.MillisBehindLatest != nil {
				in.MillisBehindLatest = *msg.MillisBehindLatest
			}
			handle = func() error { return p.ProcessRecords(in) }
		case "leaseLost":
			handle = p.LeaseLost
		case "shardEnded":
			cp = &Checkpointer{s: c}
			handle = func() error { return p.ShardEnded(ShardEndedInput{Checkpointer: cp}) }
		case "shutdownRequested":
			cp = &Checkpointer{s: c}
			handle = func() error { return p.ShutdownRequested(ShutdownRequestedInput{Checkpointer: cp}) }
		default:
			Logger.Printf("ignoring unexpected action %q", msg.Action)
			continue
		}
		call(msg.Action, handle)
		if cp != nil {
			cp.close()
		}
		// After a fatal error inside a checkpoint, write returns that error without writing.
		if err := c.write(status{Action: "status", ResponseFor: msg.Action}); err != nil {
			return err
		}
	}
}

// call runs a handler, logging its error or panic instead of letting it stop the protocol.
func call(action string, handle func() error) {
	defer func() {
		if v := recover(); v != nil {
			Logger.Printf("%s handler panicked: %v\n%s", action, v, debug.Stack())
		}
	}()
	if err := handle(); err != nil {
		Logger.Printf("%s handler failed: %v", action, err)
	}
}

// message is any line the daemon writes; each action uses a subset of the fields.
type message struct {
	Action             string       `json:"action"`
	ShardID            string       `json:"shardId"`
	SequenceNumber     *string      `json:"sequenceNumber"`
	SubSequenceNumber  *int64       `json:"subSequenceNumber"`
	Records            []wireRecord `json:"records"`
	MillisBehindLatest *int64       `json:"millisBehindLatest"`
	Error              *string      `json:"error"`
	Channel            []string     `json:"channel"`          // kcl-daemon's channel offer (initialize)
	StreamName         string       `json:"streamName"`       // several streams (initialize)
	StreamIdentifier   string       `json:"streamIdentifier"` // several streams (initialize)
	Lanes              int          `json:"lanes"`            // kcl-daemon's offer of lanes (first initialize)
}

type wireRecord struct {
	Data                        []byte `json:"data"` // encoding/json decodes padded standard base64
	PartitionKey                string `json:"partitionKey"`
	SequenceNumber              string `json:"sequenceNumber"`
	SubSequenceNumber           *int64 `json:"subSequenceNumber"`
	ApproximateArrivalTimestamp *int64 `json:"approximateArrivalTimestamp"`
}

func (w wireRecord) record() Record {
	r := Record{Data: w.Data, PartitionKey: w.PartitionKey, SequenceNumber: w.SequenceNumber}
	if w.SubSequenceNumber != nil {
		r.SubSequenceNumber = *w.SubSequenceNumber
	}
	if w.ApproximateArrivalTimestamp != nil {
		r.ApproximateArrivalTimestamp = time.UnixMilli(*w.ApproximateArrivalTimestamp)
	}
	return r
}

type status struct {
	Action      string `json:"action"`
	ResponseFor string `json:"responseFor"`
}

// checkpointRequest always carries both position keys; null means "not given".
type checkpointRequest struct {
	Action            string  `json:"action"`
	SequenceNumber    *string `json:"sequenceNumber"`
	SubSequenceNumber *int64  `json:"subSequenceNumber"`
}

// session is the connection to the daemon. err is the first fatal error (bad input, failed write);
// after it every read and write fails with it. Only one goroutine reads (the serve loop, or the lane
// router); writes may come from every lane's goroutine and go out whole, one at a time.
type session struct {
	in      *bufio.Scanner
	out     io.Writer
	pending *message // a message already read (the first, when a factory had to look at it)
	mu      sync.Mutex
	err     error
}

func newSession(r io.Reader, w io.Writer) *session {
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 64*1024), MaxLineSize)
	return &session{in: in, out: w}
}

func (s *session) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	return s.err
}

func (s *session) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// nextLine returns the next non-blank line (valid until the next call), or io.EOF at the end of input.
func (s *session) nextLine() ([]byte, error) {
	if err := s.failed(); err != nil {
		return nil, err
	}
	for s.in.Scan() {
		line := s.in.Bytes()
		if len(bytes.TrimSpace(line)) != 0 {
			return line, nil
		}
	}
	if err := s.in.Err(); err != nil {
		return nil, s.fail(fmt.Errorf("kcl: reading from the daemon: %w", err))
	}
	return nil, io.EOF
}

// next returns the next non-blank message, or io.EOF at the end of input.
func (s *session) next() (*message, error) {
	if msg := s.pending; msg != nil {
		s.pending = nil
		return msg, nil
	}
	line, err := s.nextLine()
	if err != nil {
		return nil, err
	}
	return s.decode(line)
}

func (s *session) decode(line []byte) (*message, error) {
	var msg message
	if err := json.Unmarshal(line, &msg); err != nil {
		return nil, s.fail(fmt.Errorf("kcl: malformed line from the daemon (%.80q): %w", line, err))
	}
	return &msg, nil
}

// write sends v as "\n" + JSON + "\n"; the blank line keeps stray output from gluing onto it.
func (s *session) write(v interface{}) error {
	b, err := json.Marshal(v)
	if err != nil {
		return s.fail(fmt.Errorf("kcl: encoding %T: %w", v, err))
	}
	line := make([]byte, 0, len(b)+2)
	return s.writeLine(append(append(append(line, '\n'), b...), '\n'))
}

// writeLine sends one whole protocol line with a single Write (and a Flush, if w has one).
func (s *session) writeLine(line []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, err := s.out.Write(line); err != nil {
		s.err = fmt.Errorf("kcl: writing to the daemon: %w", err)
		return s.err
	}
	if f, ok := s.out.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			s.err = fmt.Errorf("kcl: flushing to the daemon: %w", err)
			return s.err
		}
	}
	return nil
}
