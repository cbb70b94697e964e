package kcl_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"kcl-daemon.local/kcl"
)

func laneInit(lane int, shard string, offer bool) string {
	if offer { // the daemon writes the offer as the first key of lane 0's initialize
		return fmt.Sprintf(`{"lanes":4,"action":"initialize","shardId":%q,"sequenceNumber":"TRIM_HORIZON","subSequenceNumber":0}`, shard)
	}
	return fmt.Sprintf(`{"lane":%d,"action":"initialize","shardId":%q,"sequenceNumber":"TRIM_HORIZON","subSequenceNumber":0}`, lane, shard)
}

func onLane(lane int, line string) string {
	return fmt.Sprintf(`{"lane":%d,%s`, lane, line[1:])
}

// shardRecorder makes one processor per shard, each noting its calls under the shard it was given.
type shardRecorder struct {
	mu    sync.Mutex
	made  int
	calls map[string][]string
}

func (r *shardRecorder) factory() kcl.RecordProcessor {
	r.mu.Lock()
	r.made++
	r.mu.Unlock()
	shard := "?"
	note := func(call string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.calls == nil {
			r.calls = map[string][]string{}
		}
		r.calls[shard] = append(r.calls[shard], call)
	}
	return &processor{
		initialize: func(in kcl.InitializeInput) error { shard = in.ShardID; note("initialize"); return nil },
		processRecords: func(in kcl.ProcessRecordsInput) error {
			note(fmt.Sprintf("processRecords:%d", len(in.Records)))
			return in.Checkpointer.Checkpoint()
		},
		leaseLost: func() error { note("leaseLost"); return nil },
		shardEnded: func(in kcl.ShardEndedInput) error {
			note("shardEnded")
			return in.Checkpointer.Checkpoint()
		},
	}
}

// runFactory is run for RunFactoryWith: all the daemon's lines up front, then EOF.
func runFactory(t *testing.T, factory func() kcl.RecordProcessor, daemon ...string) session {
	t.Helper()
	var logged bytes.Buffer
	saved := kcl.Logger
	kcl.Logger = log.New(&logged, "", 0)
	defer func() { kcl.Logger = saved }()
	var out bytes.Buffer
	err := kcl.RunFactoryWith(factory, strings.NewReader(strings.Join(daemon, "\n")+"\n"), &out)
	s := session{err: err, raw: out.String(), logged: logged.String()}
	for _, line := range strings.Split(out.String(), "\n") {
		if line != "" {
			s.lines = append(s.lines, line)
		}
	}
	return s
}

// byLane splits a lanes conversation's output by lane ("-" for lines without one), keeping each lane's
// order; lines of different lanes interleave in any order.
func byLane(t *testing.T, lines []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range lines {
		var head struct {
			Lane *int `json:"lane"`
		}
		if err := json.Unmarshal([]byte(line), &head); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		key := "-"
		if head.Lane != nil {
			key = fmt.Sprint(*head.Lane)
		}
		out[key] = append(out[key], line)
	}
	return out
}

func TestFactoryTakesTheOfferAndServesEachLaneWithItsOwnProcessor(t *testing.T) {
	rec := &shardRecorder{}
	s := runFactory(t, rec.factory,
		laneInit(0, "shardId-0", true),
		laneInit(1, "shardId-1", false),
		onLane(0, processRecords),
		onLane(1, `{"action":"processRecords","records":[],"millisBehindLatest":0}`),
		onLane(0, ok),
		onLane(1, ok),
		onLane(1, `{"action":"shardEnded"}`),
		onLane(1, ok),
		`{"action":"close","lane":1}`,
		onLane(0, `{"action":"leaseLost"}`),
	)
	if s.err != nil {
		t.Fatalf("RunFactoryWith: %v (log: %s)", s.err, s.logged)
	}
	if s.lines[0] != `{"action":"lanes"}` {
		t.Fatalf("the offer is taken before anything else is written: %v", s.lines)
	}
	lanes := byLane(t, s.lines)
	want := map[string][]string{
		"-": {`{"action":"lanes"}`},
		"0": {
			onLane(0, statusInitialize), onLane(0, checkpointNull), onLane(0, statusProcessRecords),
			onLane(0, `{"action":"status","responseFor":"leaseLost"}`),
		},
		"1": {
			onLane(1, statusInitialize), onLane(1, checkpointNull), onLane(1, statusProcessRecords),
			onLane(1, checkpointNull), onLane(1, `{"action":"status","responseFor":"shardEnded"}`),
		},
	}
	for key, lines := range want {
		if strings.Join(lanes[key], "\n") != strings.Join(lines, "\n") {
			t.Errorf("lane %s wrote\n  %s\nwant\n  %s", key, strings.Join(lanes[key], "\n  "), strings.Join(lines, "\n  "))
		}
	}
	if rec.made != 2 {
		t.Errorf("the factory made %d processors, want one per lane", rec.made)
	}
	wantCalls := map[string][]string{
		"shardId-0": {"initialize", "processRecords:2", "leaseLost"},
		"shardId-1": {"initialize", "processRecords:0", "shardEnded"},
	}
	for shard, calls := range wantCalls {
		if strings.Join(rec.calls[shard], ",") != strings.Join(calls, ",") {
			t.Errorf("%s: calls %v, want %v", shard, rec.calls[shard], calls)
		}
	}
}

func TestAnInstanceOrNoOfferMeansOneShardWithoutLanes(t *testing.T) {
	offered := laneInit(0, "shardId-0", true)
	// Run with an instance never takes the offer
	s := run(t, &processor{}, offered, `{"action":"leaseLost"}`)
	expectLines(t, s, statusInitialize, `{"action":"status","responseFor":"leaseLost"}`)
	// RunFactory without an offer (the Java daemon, shardsPerChild = 1): one processor, plain lines
	rec := &shardRecorder{}
	s = runFactory(t, rec.factory, initialize, processRecords, ok, `{"action":"leaseLost"}`)
	expectLines(t, s, statusInitialize, checkpointNull, statusProcessRecords, `{"action":"status","responseFor":"leaseLost"}`)
	if rec.made != 1 {
		t.Errorf("the factory made %d processors, want 1", rec.made)
	}
	// an offer of one lane is no offer
	s = runFactory(t, rec.factory, strings.Replace(offered, `"lanes":4`, `"lanes":1`, 1))
	expectLines(t, s, statusInitialize)
}

// pipeDaemon plays the daemon interactively: write a line, read the processor's next protocol line.
type pipeDaemon struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func startFactory(t *testing.T, factory func() kcl.RecordProcessor) *pipeDaemon {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	d := &pipeDaemon{t: t, in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	go func() {
		err := kcl.RunFactoryWith(factory, inR, outW)
		outW.Close()
		d.done <- err
	}()
	return d
}

func (d *pipeDaemon) send(line string) {
	d.t.Helper()
	if _, err := io.WriteString(d.in, line+"\n"); err != nil {
		d.t.Fatalf("write %s: %v", line, err)
	}
}

func (d *pipeDaemon) expect(want string) {
	d.t.Helper()
	got := make(chan string, 1)
	go func() {
		for d.out.Scan() {
			if line := d.out.Text(); line != "" {
				got <- line
				return
			}
		}
		got <- "<end of output>"
	}()
	select {
	case line := <-got:
		if line != want {
			d.t.Fatalf("processor wrote %s, want %s", line, want)
		}
	case <-time.After(20 * time.Second):
		d.t.Fatalf("no line within 20 s, want %s", want)
	}
}

func TestALaneWaitingForItsCheckpointReplyHoldsUpNoOtherLane(t *testing.T) {
	rec := &shardRecorder{}
	d := startFactory(t, rec.factory)
	d.send(laneInit(0, "shardId-0", true))
	d.expect(`{"action":"lanes"}`)
	d.expect(onLane(0, statusInitialize))
	d.send(onLane(0, processRecords))
	d.expect(onLane(0, checkpointNull)) // lane 0 now waits for its reply...
	d.send(laneInit(1, "shardId-1", false))
	d.expect(onLane(1, statusInitialize)) // ...while lane 1 starts
	d.send(onLane(1, `{"action":"leaseLost"}`))
	d.expect(onLane(1, `{"action":"status","responseFor":"leaseLost"}`))
	d.send(`{"action":"close","lane":1}`)
	d.send(onLane(0, reply("ThrottlingException")))
	d.expect(onLane(0, statusProcessRecords))
	d.send(onLane(0, `{"action":"leaseLost"}`)) // lane 1's close ended only lane 1
	d.expect(onLane(0, `{"action":"status","responseFor":"leaseLost"}`))
	d.in.Close()
	if err := <-d.done; err != nil {
		t.Fatalf("RunFactoryWith: %v", err)
	}
	shards := make([]string, 0, len(rec.calls))
	for shard := range rec.calls {
		shards = append(shards, shard)
	}
	sort.Strings(shards)
	if strings.Join(shards, ",") != "shardId-0,shardId-1" || rec.made != 2 {
		t.Fatalf("processors: %d for shards %v", rec.made, shards)
	}
}

func TestLinesNamingNoLaneAreSkippedAndAMalformedLaneLineIsFatal(t *testing.T) {
	rec := &shardRecorder{}
	s := runFactory(t, rec.factory,
		laneInit(0, "shardId-0", true),
		`{"action":"leaseLost"}`,
		` {"action":"close" , "lane":7}`, // a close of a lane never opened, in another key order
		onLane(0, `{"action":"leaseLost"}`),
	)
	if s.err != nil {
		t.Fatalf("RunFactoryWith: %v", s.err)
	}
	if !strings.Contains(s.logged, "names no lane") {
		t.Errorf("the line without a lane is not logged: %q", s.logged)
	}
	if got := byLane(t, s.lines)["0"]; len(got) != 2 || rec.made != 1 {
		t.Errorf("lane 0 wrote %v with %d processors", got, rec.made)
	}
	s = runFactory(t, rec.factory, laneInit(0, "shardId-0", true), `{"lane":0,"action":`)
	if s.err == nil || !strings.Contains(s.err.Error(), "malformed line") {
		t.Fatalf("a malformed line on a lane: err = %v", s.err)
	}
}
