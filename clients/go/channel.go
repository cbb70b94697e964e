package kcl

// Channel is kcl-daemon's log/metric channel: lines the daemon logs under the shard, and metric values
// it exports with its own (Prometheus, CloudWatch, OTLP). The daemon offers it in initialize; with a
// daemon that does not (the Java daemon), Log writes to Logger and Metric does nothing. The daemon
// rate-limits the channel and bounds the number of distinct metric series.
type Channel struct {
	s       conn
	offered map[string]bool
}

type logLine struct {
	Action  string `json:"action"`
	Level   string `json:"level"`
	Message string `json:"message"`
}

type metricLine struct {
	Action     string            `json:"action"`
	Name       string            `json:"name"`
	Value      float64           `json:"value"`
	Unit       *string           `json:"unit"`
	Dimensions map[string]string `json:"dimensions"`
}

// Log has the daemon log message under this shard at level: debug, info, warning, error or critical.
func (c *Channel) Log(level, message string) error {
	if c == nil || !c.offered["log"] {
		Logger.Printf("%s %s", level, message)
		return nil
	}
	return c.s.write(logLine{Action: "log", Level: level, Message: message})
}

// Metric sends one value of a metric. unit is a CloudWatch unit (Count, Milliseconds, Bytes, ...) or
// "" for none; dimensions may be nil.
func (c *Channel) Metric(name string, value float64, unit string, dimensions map[string]string) error {
	if c == nil || !c.offered["metric"] {
		return nil
	}
	if dimensions == nil {
		dimensions = map[string]string{}
	}
	line := metricLine{Action: "metric", Name: name, Value: value, Dimensions: dimensions}
	if unit != "" {
		line.Unit = &unit
	}
	return c.s.write(line)
}

type deadLetterLine struct {
	Action            string `json:"action"`
	SequenceNumber    string `json:"sequenceNumber"`
	SubSequenceNumber int64  `json:"subSequenceNumber"`
	Reason            string `json:"reason"`
}

// DeadLetter hands record (of the batch being processed) to the daemon's dead-letter destination and
// goes on: the daemon writes it before any later checkpoint and never delivers it again. It reports
// false when the daemon did not offer it (poisonRecordPolicy is not DEAD_LETTER, or the Java daemon).
func (c *Channel) DeadLetter(record Record, reason string) (bool, error) {
	if c == nil || !c.offered["deadLetter"] {
		return false, nil
	}
	line := deadLetterLine{
		Action: "deadLetter", SequenceNumber: record.SequenceNumber,
		SubSequenceNumber: record.SubSequenceNumber, Reason: reason,
	}
	return true, c.s.write(line)
}
