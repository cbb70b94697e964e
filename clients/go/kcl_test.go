package kcl_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"testing"
	"time"

	"kcl-daemon.local/kcl"
)

// processor calls whichever functions are set; the others succeed.
type processor struct {
	initialize        func(kcl.InitializeInput) error
	processRecords    func(kcl.ProcessRecordsInput) error
	leaseLost         func() error
	shardEnded        func(kcl.ShardEndedInput) error
	shutdownRequested func(kcl.ShutdownRequestedInput) error
}

func (p *processor) Initialize(in kcl.InitializeInput) error {
	if p.initialize == nil {
		return nil
	}
	return p.initialize(in)
}

func (p *processor) ProcessRecords(in kcl.ProcessRecordsInput) error {
	if p.processRecords == nil {
		return nil
	}
	return p.processRecords(in)
}

func (p *processor) LeaseLost() error {
	if p.leaseLost == nil {
		return nil
	}
	return p.leaseLost()
}

func (p *processor) ShardEnded(in kcl.ShardEndedInput) error {
	if p.shardEnded == nil {
		return nil
	}
	return p.shardEnded(in)
}

func (p *processor) ShutdownRequested(in kcl.ShutdownRequestedInput) error {
	if p.shutdownRequested == nil {
		return nil
	}
	return p.shutdownRequested(in)
}

// session is one RunWith call: what the processor wrote and what the client logged.
type session struct {
	err    error
	raw    string
	lines  []string // non-blank output lines
	logged string
}

// run plays the daemon: it sends the given lines (checkpoint replies included, in order), then EOF.
func run(t *testing.T, p kcl.RecordProcessor, daemon ...string) session {
	t.Helper()
	var logged bytes.Buffer
	saved := kcl.Logger
	kcl.Logger = log.New(&logged, "", 0)
	defer func() { kcl.Logger = saved }()

	var out bytes.Buffer
	err := kcl.RunWith(p, strings.NewReader(strings.Join(daemon, "\n")+"\n"), &out)
	s := session{err: err, raw: out.String(), logged: logged.String()}
	for _, line := range strings.Split(out.String(), "\n") {
		if line != "" {
			s.lines = append(s.lines, line)
		}
	}
	return s
}

func expectLines(t *testing.T, s session, want ...string) {
	t.Helper()
	if s.err != nil {
		t.Fatalf("RunWith: %v (log: %s)", s.err, s.logged)
	}
	if strings.Join(s.lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("processor wrote\n  %s\nwant\n  %s", strings.Join(s.lines, "\n  "), strings.Join(want, "\n  "))
	}
}

const (
	initialize     = `{"action":"initialize","shardId":"shardId-000000000001","sequenceNumber":"TRIM_HORIZON","subSequenceNumber":0}`
	processRecords = `{"action":"processRecords","records":[` +
		`{"data":"aGVsbG8=","partitionKey":"pk-a","sequenceNumber":"101","approximateArrivalTimestamp":1700000000123,"subSequenceNumber":0,"action":"record"},` +
		`{"data":"AP8=","partitionKey":"été","sequenceNumber":"102","approximateArrivalTimestamp":0,"subSequenceNumber":2,"action":"record"}` +
		`],"millisBehindLatest":1234}`
	ok = `{"action":"checkpoint","sequenceNumber":null,"subSequenceNumber":null,"error":null}`

	statusInitialize     = `{"action":"status","responseFor":"initialize"}`
	statusProcessRecords = `{"action":"status","responseFor":"processRecords"}`
	checkpointNull       = `{"action":"checkpoint","sequenceNumber":null,"subSequenceNumber":null}`
)

func reply(errorName string) string {
	return fmt.Sprintf(`{"action":"checkpoint","sequenceNumber":null,"subSequenceNumber":null,"error":%q}`, errorName)
}

func TestLifecycle(t *testing.T) {
	var init kcl.InitializeInput
	var batch kcl.ProcessRecordsInput
	var calls []string
	p := &processor{
		initialize: func(in kcl.InitializeInput) error { init = in; calls = append(calls, "initialize"); return nil },
		processRecords: func(in kcl.ProcessRecordsInput) error {
			batch = in
			calls = append(calls, "processRecords")
			return nil
		},
		shutdownRequested: func(in kcl.ShutdownRequestedInput) error {
			calls = append(calls, "shutdownRequested")
			return in.Checkpointer.Checkpoint()
		},
		leaseLost: func() error { calls = append(calls, "leaseLost"); return nil },
		shardEnded: func(in kcl.ShardEndedInput) error {
			calls = append(calls, "shardEnded")
			return in.Checkpointer.Checkpoint()
		},
	}
	s := run(t, p, initialize, processRecords, `{"action":"shutdownRequested"}`, ok,
		`{"action":"leaseLost"}`, `{"action":"shardEnded"}`, ok)
	expectLines(t, s,
		statusInitialize,
		statusProcessRecords,
		checkpointNull,
		`{"action":"status","responseFor":"shutdownRequested"}`,
		`{"action":"status","responseFor":"leaseLost"}`,
		checkpointNull,
		`{"action":"status","responseFor":"shardEnded"}`,
	)
	if !strings.HasPrefix(s.raw, "\n"+statusInitialize+"\n\n") {
		t.Errorf("messages are not framed as \\n JSON \\n: %q", s.raw[:60])
	}
	if got := strings.Join(calls, ","); got != "initialize,processRecords,shutdownRequested,leaseLost,shardEnded" {
		t.Errorf("calls = %s", got)
	}
	if init != (kcl.InitializeInput{ShardID: "shardId-000000000001", SequenceNumber: "TRIM_HORIZON"}) {
		t.Errorf("initialize input = %+v", init)
	}
	if batch.MillisBehindLatest != 1234 || len(batch.Records) != 2 || batch.Checkpointer == nil {
		t.Fatalf("processRecords input = %+v", batch)
	}
	want := []kcl.Record{
		{Data: []byte("hello"), PartitionKey: "pk-a", SequenceNumber: "101", ApproximateArrivalTimestamp: time.UnixMilli(1700000000123)},
		{Data: []byte{0, 255}, PartitionKey: "été", SequenceNumber: "102", SubSequenceNumber: 2, ApproximateArrivalTimestamp: time.UnixMilli(0)},
	}
	for i, r := range batch.Records {
		w := want[i]
		if !bytes.Equal(r.Data, w.Data) || r.PartitionKey != w.PartitionKey || r.SequenceNumber != w.SequenceNumber ||
			r.SubSequenceNumber != w.SubSequenceNumber || !r.ApproximateArrivalTimestamp.Equal(w.ApproximateArrivalTimestamp) {
			t.Errorf("record %d = %+v, want %+v", i, r, w)
		}
	}
}

func TestNullFields(t *testing.T) {
	var init kcl.InitializeInput
	var batch kcl.ProcessRecordsInput
	p := &processor{
		initialize:     func(in kcl.InitializeInput) error { init = in; return nil },
		processRecords: func(in kcl.ProcessRecordsInput) error { batch = in; return nil },
	}
	s := run(t, p,
		`{"action":"initialize","shardId":"shardId-000000000042","sequenceNumber":null,"subSequenceNumber":null}`,
		`{"action":"processRecords","records":[],"millisBehindLatest":null}`,
		`{"action":"processRecords","records":[{"data":"","partitionKey":"","sequenceNumber":"8","approximateArrivalTimestamp":null,"subSequenceNumber":null,"action":"record"}],"millisBehindLatest":null}`,
	)
	expectLines(t, s, statusInitialize, statusProcessRecords, statusProcessRecords)
	if init != (kcl.InitializeInput{ShardID: "shardId-000000000042"}) {
		t.Errorf("initialize input = %+v", init)
	}
	r := batch.Records[0]
	if len(r.Data) != 0 || r.SequenceNumber != "8" || r.SubSequenceNumber != 0 || !r.ApproximateArrivalTimestamp.IsZero() {
		t.Errorf("record = %+v", r)
	}
}

func TestCheckpointForms(t *testing.T) {
	record := kcl.Record{SequenceNumber: "49590338271490256608559692540925702759324208523137515618", SubSequenceNumber: 3}
	cases := []struct {
		name string
		call func(*kcl.Checkpointer) error
		want string
	}{
		{"Checkpoint", (*kcl.Checkpointer).Checkpoint, checkpointNull},
		{"CheckpointRecord", func(c *kcl.Checkpointer) error { return c.CheckpointRecord(record) },
			`{"action":"checkpoint","sequenceNumber":"49590338271490256608559692540925702759324208523137515618","subSequenceNumber":3}`},
		{"CheckpointAt", func(c *kcl.Checkpointer) error { return c.CheckpointAt("7", 0) },
			`{"action":"checkpoint","sequenceNumber":"7","subSequenceNumber":0}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			p := &processor{processRecords: func(in kcl.ProcessRecordsInput) error {
				err = tc.call(in.Checkpointer)
				return nil
			}}
			expectLines(t, run(t, p, processRecords, ok), tc.want, statusProcessRecords)
			if err != nil {
				t.Errorf("checkpoint: %v", err)
			}
		})
	}
}

func TestCheckpointErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retriable bool
	}{
		{"ThrottlingException", true},
		{"KinesisClientLibDependencyException", true},
		{"ShutdownException", false},
		{"InvalidStateException", false},
		{"IllegalArgumentException", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			p := &processor{shardEnded: func(in kcl.ShardEndedInput) error {
				err = in.Checkpointer.Checkpoint()
				return err
			}}
			s := run(t, p, `{"action":"shardEnded"}`, reply(tc.name))
			expectLines(t, s, checkpointNull, `{"action":"status","responseFor":"shardEnded"}`)
			var ce *kcl.CheckpointError
			if !errors.As(err, &ce) || ce.Name != tc.name || ce.Retriable() != tc.retriable {
				t.Fatalf("err = %#v, want CheckpointError{%s} with Retriable() %v", err, tc.name, tc.retriable)
			}
			if !strings.Contains(s.logged, tc.name) {
				t.Errorf("the handler's error was not logged: %q", s.logged)
			}
		})
	}
}

func TestHandlerErrorsAndPanicsStillSendStatus(t *testing.T) {
	p := &processor{
		initialize:     func(kcl.InitializeInput) error { return errors.New("no config") },
		processRecords: func(kcl.ProcessRecordsInput) error { panic("boom") },
	}
	s := run(t, p, initialize, processRecords)
	expectLines(t, s, statusInitialize, statusProcessRecords)
	for _, want := range []string{"initialize handler failed: no config", "processRecords handler panicked: boom", "kcl_test.go"} {
		if !strings.Contains(s.logged, want) {
			t.Errorf("log lacks %q:\n%s", want, s.logged)
		}
	}
}

func TestLargeLine(t *testing.T) {
	data := bytes.Repeat([]byte{0xab}, 12<<20)
	line := `{"action":"processRecords","records":[{"data":"` + base64.StdEncoding.EncodeToString(data) +
		`","partitionKey":"pk","sequenceNumber":"1","approximateArrivalTimestamp":1,"subSequenceNumber":0,"action":"record"}],"millisBehindLatest":0}`
	var got []byte
	p := &processor{processRecords: func(in kcl.ProcessRecordsInput) error {
		got = in.Records[0].Data
		return in.Checkpointer.CheckpointRecord(in.Records[0])
	}}
	s := run(t, p, line, ok)
	expectLines(t, s, `{"action":"checkpoint","sequenceNumber":"1","subSequenceNumber":0}`, statusProcessRecords)
	if !bytes.Equal(got, data) {
		t.Errorf("got %d bytes of data, want %d", len(got), len(data))
	}
}

func TestLineOverLimitIsFatal(t *testing.T) {
	s := run(t, &processor{}, initialize, strings.Repeat("x", kcl.MaxLineSize+1))
	if s.err == nil || !strings.Contains(s.err.Error(), "too long") {
		t.Fatalf("RunWith = %v, want a token-too-long error", s.err)
	}
}

func TestIgnoresBlankLinesAndUnexpectedActions(t *testing.T) {
	s := run(t, &processor{}, "", "   ", initialize, "\r", `{"action":"bogus"}`, `{"noAction":true}`, ok, "")
	expectLines(t, s, statusInitialize)
	for _, want := range []string{`"bogus"`, `""`, `"checkpoint"`} {
		if !strings.Contains(s.logged, "ignoring unexpected action "+want) {
			t.Errorf("log lacks action %s:\n%s", want, s.logged)
		}
	}
}

func TestMalformedLineIsFatal(t *testing.T) {
	for _, line := range []string{"not json", `[1,2]`, `{"action":"processRecords","records":[{"data":"%%%"}]}`} {
		s := run(t, &processor{}, initialize, line, initialize)
		if s.err == nil || !strings.Contains(s.err.Error(), "malformed line") {
			t.Errorf("%s: RunWith = %v, want a malformed line error", line, s.err)
		}
		if len(s.lines) != 1 {
			t.Errorf("%s: processor wrote %q after the bad line", line, s.lines)
		}
	}
}

func TestMalformedCheckpointReplyIsFatal(t *testing.T) {
	p := &processor{processRecords: func(in kcl.ProcessRecordsInput) error { return in.Checkpointer.Checkpoint() }}
	s := run(t, p, processRecords, "not json", initialize)
	if s.err == nil || !strings.Contains(s.err.Error(), "malformed line") {
		t.Errorf("RunWith = %v, want a malformed line error", s.err)
	}
	if strings.Join(s.lines, "") != checkpointNull {
		t.Errorf("processor wrote %q, want only the checkpoint request", s.lines)
	}
}

func TestEOFWhileWaitingForCheckpointReply(t *testing.T) {
	var err error
	p := &processor{processRecords: func(in kcl.ProcessRecordsInput) error {
		err = in.Checkpointer.Checkpoint()
		return nil
	}}
	expectLines(t, run(t, p, processRecords), checkpointNull, statusProcessRecords)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("checkpoint = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestWrongReplyToCheckpoint(t *testing.T) {
	var err error
	p := &processor{processRecords: func(in kcl.ProcessRecordsInput) error {
		err = in.Checkpointer.Checkpoint()
		return nil
	}}
	expectLines(t, run(t, p, processRecords, `{"action":"leaseLost"}`), checkpointNull, statusProcessRecords)
	var ce *kcl.CheckpointError
	if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), `"leaseLost"`) {
		t.Errorf("checkpoint = %v, want a protocol error naming leaseLost", err)
	}
}

func TestCheckpointerExpiresWithItsHandler(t *testing.T) {
	var saved *kcl.Checkpointer
	var err error
	p := &processor{
		processRecords: func(in kcl.ProcessRecordsInput) error { saved = in.Checkpointer; return nil },
		leaseLost:      func() error { err = saved.Checkpoint(); return nil },
	}
	expectLines(t, run(t, p, processRecords, `{"action":"leaseLost"}`),
		statusProcessRecords, `{"action":"status","responseFor":"leaseLost"}`)
	var ce *kcl.CheckpointError
	if !errors.As(err, &ce) || ce.Name != "InvalidStateException" {
		t.Errorf("stale checkpoint = %v, want InvalidStateException", err)
	}
}

type flushWriter struct {
	bytes.Buffer
	flushes int
}

func (w *flushWriter) Flush() error { w.flushes++; return nil }

func TestFlushesEveryMessage(t *testing.T) {
	p := &processor{shardEnded: func(in kcl.ShardEndedInput) error { return in.Checkpointer.Checkpoint() }}
	var w flushWriter
	err := kcl.RunWith(p, strings.NewReader(initialize+"\n"+`{"action":"shardEnded"}`+"\n"+ok+"\n"), &w)
	if err != nil || w.flushes != 3 {
		t.Errorf("RunWith = %v with %d flushes, want nil and 3", err, w.flushes)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteFailureIsFatal(t *testing.T) {
	err := kcl.RunWith(&processor{}, strings.NewReader(initialize+"\n"+initialize+"\n"), failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("RunWith = %v, want the write error", err)
	}
}

func TestInitializeNamesTheStreamOfSeveral(t *testing.T) {
	var init kcl.InitializeInput
	p := &processor{initialize: func(in kcl.InitializeInput) error { init = in; return nil }}
	s := run(t, p,
		`{"action":"initialize","shardId":"shardId-000000000002","sequenceNumber":"LATEST","subSequenceNumber":0,`+
			`"streamName":"orders","streamIdentifier":"123456789012:orders:1700000000"}`,
	)
	expectLines(t, s, statusInitialize)
	if init.StreamName != "orders" || init.StreamIdentifier != "123456789012:orders:1700000000" {
		t.Errorf("initialize input = %+v", init)
	}
}

func TestDeadLetterWhenOffered(t *testing.T) {
	var offered []bool
	p := &processor{
		processRecords: func(in kcl.ProcessRecordsInput) error {
			ok, err := in.Channel.DeadLetter(in.Records[1], "not JSON")
			offered = append(offered, ok)
			return err
		},
	}
	withOffer := strings.Replace(initialize, `"subSequenceNumber":0}`, `"subSequenceNumber":0,"channel":["log","metric","deadLetter"]}`, 1)
	s := run(t, p, withOffer, processRecords, initialize, processRecords)
	expectLines(t, s, statusInitialize,
		`{"action":"deadLetter","sequenceNumber":"102","subSequenceNumber":2,"reason":"not JSON"}`,
		statusProcessRecords, statusInitialize, statusProcessRecords)
	if fmt.Sprint(offered) != "[true false]" {
		t.Errorf("DeadLetter reported %v, want [true false] (offered, then a daemon without the offer)", offered)
	}
}
