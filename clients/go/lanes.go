package kcl

// Lanes: several shards in one process, when kcl-daemon offers them (protocol/README.md, section 11).
//
// kcl-daemon with shardsPerChild above 1 puts "lanes": N in the first initialize. RunFactory takes the
// offer by writing {"action":"lanes"} before anything else; from then on every line, both ways, carries
// "lane": L, and {"action":"close","lane":L} is lane L's end of input. Each lane is one shard's ordinary
// conversation, served by a processor of its own (made by the factory at the lane's first line) on a
// goroutine of its own: a lane waiting for a checkpoint reply, or busy in a slow handler, never holds
// up the others.
//
// The reading goroutine (the router) only finds each line's lane and hands the line on: it reads the
// lane number from the front of the line, where kcl-daemon writes it, and decodes nothing else, so
// every lane decodes its own batches (in parallel, on as many cores as there are busy lanes). One
// goroutine per lane, none per line or record.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// RunFactory serves the daemon on stdin and stdout until stdin closes, with a processor made by
// newProcessor for each shard. Under kcl-daemon's shardsPerChild (lanes) this process serves several
// shards at once: each has its own processor, called on a goroutine of its own, so processors of
// different shards run concurrently and anything they share must be safe for that. Without the offer
// (the Java daemon, or shardsPerChild = 1) it makes one processor and behaves exactly as Run.
func RunFactory(newProcessor func() RecordProcessor) {
	exitOnError(RunFactoryWith(newProcessor, os.Stdin, os.Stdout))
}

// RunFactoryWith is RunFactory on r and w; it returns as RunWith does. When a lane fails with a fatal
// error (a malformed line for it, a failed write), RunFactoryWith returns that error at once, without
// waiting for the other lanes or for the end of r.
func RunFactoryWith(newProcessor func() RecordProcessor, r io.Reader, w io.Writer) error {
	s := newSession(r, w)
	first, err := s.next()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if first.Action != "initialize" || first.Lanes < 2 {
		s.pending = first
		return serve(newProcessor(), s)
	}
	if err := s.write(lanesAccepted{Action: "lanes"}); err != nil {
		return err
	}
	return newRouter(newProcessor, s).run(first)
}

type lanesAccepted struct {
	Action string `json:"action"`
}

// router reads every line and hands it to its lane; it ends when the input ends and every lane has
// finished, or at the first fatal error of any lane.
type router struct {
	newProcessor func() RecordProcessor
	s            *session
	lanes        map[int64]*lane
	running      sync.WaitGroup
	failure      chan error // the first fatal error of a lane (buffered: one is enough)
}

func newRouter(newProcessor func() RecordProcessor, s *session) *router {
	return &router{newProcessor: newProcessor, s: s, lanes: map[int64]*lane{}, failure: make(chan error, 1)}
}

func (rt *router) run(first *message) error {
	rt.open(0, first) // the offer came on lane 0's initialize, before lanes had numbers
	read := make(chan error, 1)
	go func() { read <- rt.read() }()
	select {
	case err := <-rt.failure:
		return err
	case err := <-read:
		for _, l := range rt.lanes {
			l.end()
		}
		if err != nil {
			return err
		}
		done := make(chan struct{})
		go func() { rt.running.Wait(); close(done) }()
		select {
		case err := <-rt.failure:
			return err
		case <-done:
			return nil
		}
	}
}

// read routes lines until the input ends (nil) or cannot be read (the error).
func (rt *router) read() error {
	for {
		line, err := rt.s.nextLine()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		number, closing, err := laneOf(line)
		if err != nil {
			return rt.s.fail(fmt.Errorf("kcl: malformed line from the daemon (%.80q): %w", line, err))
		}
		if number < 0 {
			Logger.Printf("skipping a line that names no lane: %.120q", line)
			continue
		}
		l := rt.lanes[number]
		if closing {
			if l != nil {
				delete(rt.lanes, number)
				l.end()
			}
			continue
		}
		if l == nil {
			l = rt.open(number, nil)
		}
		l.push(append([]byte(nil), line...)) // the scanner reuses its buffer
	}
}

func (rt *router) open(number int64, first *message) *lane {
	prefix := []byte("\n{\"lane\":" + strconv.FormatInt(number, 10) + ",")
	l := &lane{number: number, s: rt.s, prefix: prefix, pending: first}
	l.ready = sync.NewCond(&l.mu)
	rt.lanes[number] = l
	p := rt.newProcessor()
	rt.running.Add(1)
	go func() {
		defer rt.running.Done()
		if err := serve(p, l); err != nil {
			select {
			case rt.failure <- err:
			default:
			}
		}
	}()
	return l
}

var (
	lanePrefix  = []byte(`{"lane":`)
	closeAction = []byte(`"action":"close"`)
)

// laneOf reads a line's lane number (-1: none) and whether it closes the lane. kcl-daemon writes the
// lane first ({"lane":3,...}) on every line but a close; any other line is decoded to find it.
func laneOf(line []byte) (number int64, closing bool, err error) {
	line = bytes.TrimLeft(line, " \t\r")
	if bytes.HasPrefix(line, lanePrefix) {
		rest := line[len(lanePrefix):]
		digits := 0
		for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
			digits++
		}
		if digits > 0 && digits < 19 && digits < len(rest) && rest[digits] == ',' {
			n, _ := strconv.ParseInt(string(rest[:digits]), 10, 64)
			after := rest[digits+1:]
			closing := bytes.HasPrefix(after, closeAction) && len(after) > len(closeAction) &&
				(after[len(closeAction)] == '}' || after[len(closeAction)] == ',')
			return n, closing, nil
		}
	}
	var head struct {
		Lane   json.RawMessage `json:"lane"`
		Action string          `json:"action"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return -1, false, err
	}
	n, err := strconv.ParseInt(string(head.Lane), 10, 64)
	if err != nil || n < 0 {
		return -1, false, nil
	}
	return n, head.Action == "close", nil
}

// lane is one shard's conversation inside the shared stdin and stdout: its lines arrive from the router
// (at most two wait at a time in a well-behaved conversation; the queue does not bound them), its
// messages go out with "lane" as their first key.
type lane struct {
	number  int64
	s       *session
	prefix  []byte
	pending *message
	mu      sync.Mutex
	ready   *sync.Cond
	lines   [][]byte
	ended   bool
}

func (l *lane) push(line []byte) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	l.ready.Signal()
}

func (l *lane) end() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
	l.ready.Signal()
}

func (l *lane) next() (*message, error) {
	if msg := l.pending; msg != nil {
		l.pending = nil
		return msg, nil
	}
	l.mu.Lock()
	for len(l.lines) == 0 && !l.ended {
		l.ready.Wait()
	}
	if len(l.lines) == 0 {
		l.mu.Unlock()
		return nil, io.EOF
	}
	line := l.lines[0]
	l.lines[0] = nil
	l.lines = l.lines[1:]
	l.mu.Unlock()
	msg, err := l.s.decode(line)
	if err == nil && msg.Action == "close" { // a close written in some other key order
		return nil, io.EOF
	}
	return msg, err
}

func (l *lane) write(v interface{}) error {
	b, err := json.Marshal(v)
	if err != nil {
		return l.s.fail(fmt.Errorf("kcl: encoding %T: %w", v, err))
	}
	line := make([]byte, 0, len(l.prefix)+len(b)+1)
	line = append(append(line, l.prefix...), b[1:]...) // b is a JSON object: "lane" goes in first
	return l.s.writeLine(append(line, '\n'))
}
