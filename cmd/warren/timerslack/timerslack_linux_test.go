package timerslack

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSet: every thread of the process, the runtime's own
// included, takes the slack, and so do threads started afterwards.
func TestSet(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting other threads' timer slack needs CAP_SYS_NICE")
	}
	defer Set(50 * time.Microsecond) // the kernel's default, for the package's other tests
	threads, refused, err := Set(2 * time.Millisecond)
	if err != nil || refused != 0 || threads < 2 {
		t.Fatalf("set: %d threads, %d refused, %v", threads, refused, err)
	}
	before, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	// Goroutines blocked in system calls (a blocking pipe read, outside
	// the netpoller) make the runtime start threads.
	var writers []int
	for range 4 {
		var p [2]int
		if err := syscall.Pipe(p[:]); err != nil {
			t.Fatal(err)
		}
		writers = append(writers, p[1])
		go func() {
			buf := make([]byte, 1)
			syscall.Read(p[0], buf)
			syscall.Close(p[0])
		}()
	}
	// Time for the runtime to start threads for the blocked reads. How
	// many it starts varies (it reuses idle ones), so there is no count
	// to wait for.
	time.Sleep(200 * time.Millisecond)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, w := range writers {
			syscall.Write(w, []byte{0})
			syscall.Close(w)
		}
	}()
	if len(tasks) <= len(before) {
		t.Logf("no thread started: %d before, %d after", len(before), len(tasks))
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + task.Name() + "/timerslack_ns")
		if err != nil {
			t.Fatal(err)
		}
		if ns, _ := strconv.Atoi(strings.TrimSpace(string(b))); ns != 2_000_000 {
			t.Errorf("thread %s: timer slack %d ns, want 2000000 (of %d threads)", task.Name(), ns, len(tasks))
		}
	}
}
