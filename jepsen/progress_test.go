package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLogLinesGoAboveTheStatusLine: on a terminal a log line wipes the
// status line, is written, and the status line is drawn again under it,
// so that the screen holds every log line and one status line last.
func TestLogLinesGoAboveTheStatusLine(t *testing.T) {
	var out bytes.Buffer
	l := &liveLine{out: &out, tty: true}
	l.Write([]byte("before any status\n"))
	l.set("0:01/1:00 status")
	l.Write([]byte("a log line\n"))
	l.set("0:02/1:00 status")
	l.set("")
	want := "before any status\n" +
		clearLine + "0:01/1:00 status" +
		clearLine + "a log line\n" + "0:01/1:00 status" +
		clearLine + "0:02/1:00 status" +
		clearLine
	if got := out.String(); got != want {
		t.Errorf("terminal output\n%q\nwant\n%q", got, want)
	}
}

// TestProgressLineSaysWhereTheRunIs: elapsed of total, the counts, the
// fault in force (cut short, for a terminal's width) and the nodes up.
func TestProgressLineSaysWhereTheRunIs(t *testing.T) {
	p := progress{elapsed: 42 * time.Second, total: 2 * time.Minute, published: 1200, confirmed: 1100, delivers: 1000, fault: "kill warren-1", up: 2, nodes: 3}
	want := "0:42/2:00  published 1200  confirmed 1100  delivered 1000  fault: kill warren-1  up 2/3"
	if got := p.String(); got != want {
		t.Errorf("progress line\n%q\nwant\n%q", got, want)
	}
	p.fault = "halves warren-0 warren-1 warren-2: warren-2 | warren-0 warren-1"
	if got := p.String(); !strings.Contains(got, "fault: halves warren-0 warren-1 warren-2: warr…  up") {
		t.Errorf("a long fault not cut short: %q", got)
	}
	p.fault, p.elapsed = "", 2*time.Minute+5*time.Second
	if got := p.String(); !strings.Contains(got, "2:05/2:00") || !strings.Contains(got, "fault: none (healed: draining, checking)") {
		t.Errorf("after the duration: %q", got)
	}
}
