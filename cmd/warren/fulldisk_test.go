package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/warrenmq/warren/raftq/testwait"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFullDiskStopsTheNodeCleanly fills the file system under a node's
// data directory (a small tmpfs) with confirmed publishes: the node stops
// by itself, with exit status 1, a line saying why and no panic; once
// there is room again it starts, and every confirmed message is there.
func TestFullDiskStopsTheNodeCleanly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dataDir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", dataDir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dataDir).Run() })
	addr := freeAddr(t)
	start := func(stderr *lockedBuffer) (*exec.Cmd, chan error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "WARREN_TEST_RUN_SERVER=1", "WARREN_DATA_DIR="+dataDir,
			"WARREN_AMQP="+addr, "WARREN_LOG_LEVEL=warn", "WARREN_DISK_FREE_LIMIT=0")
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd, exited
	}
	stderr := &lockedBuffer{}
	_, exited := start(stderr)
	var c *amqp091.Connection
	waitForLogin := func() {
		testwait.ForNil(t, 20*time.Second, "a login", func() error {
			var err error
			c, err = amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/", addr))
			return err
		})
	}
	waitForLogin()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("full", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	body := bytes.Repeat([]byte("w"), 64<<10)
	confirmed := map[string]bool{}
	for i := 0; ; i++ {
		id := fmt.Sprintf("m%05d", i)
		if err := ch.PublishWithContext(context.Background(), "", "full", false, false, amqp091.Publishing{MessageId: id, Body: body}); err != nil {
			break
		}
		ok := false
		select {
		case cf, open := <-confirms:
			ok = open && cf.Ack
		case <-time.After(30 * time.Second):
		}
		if !ok {
			break
		}
		confirmed[id] = true
		if i > 10000 {
			t.Fatal("the disk never filled")
		}
	}
	select {
	case err := <-exited:
		if code := exitCode(err); code != 1 {
			t.Fatalf("the node exited with %v (status %d), want status 1\n%s", err, code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the node did not stop on a full disk\n%s", stderr.String())
	}
	log := stderr.String()
	if strings.Contains(log, "panic") || strings.Contains(log, "goroutine ") {
		t.Fatalf("the node panicked on a full disk:\n%s", log)
	}
	if !strings.Contains(log, "storage failed") {
		t.Fatalf("the node did not say why it stopped:\n%s", log)
	}
	if len(confirmed) < 10 {
		t.Fatalf("only %d publishes were confirmed before the disk filled", len(confirmed))
	}

	// Room again: the node starts, and every confirmed message is there.
	if out, err := exec.Command("mount", "-o", "remount,size=200m", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	stderr = &lockedBuffer{}
	start(stderr)
	waitForLogin()
	defer c.Close()
	ch, err = c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("full", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for len(confirmed) > 0 {
		select {
		case d := <-deliveries:
			delete(confirmed, d.MessageId)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d confirmed messages missing after the restart", len(confirmed))
		}
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}
