// Command machine-cost measures what the kernel charges on this machine for the two things
// every quorum-queue message needs, so that CPU figures from different machines can be
// compared and a floor put under them:
//
//   - a log sync: one 1,100-byte write followed by fdatasync, as the write-ahead log does
//     for each Raft entry on each node; once appending to a growing file, once writing
//     into one already allocated (the cheapest a log could make it);
//   - a served request: a process idle in its poller wakes for one 1,000-byte message on a
//     loopback TCP connection and writes a 60-byte answer, as a follower does for each
//     AppendEntries. Served twice: by a Go process through its netpoller (Warren's case),
//     and by a thread blocked in read(2) (the kernel's share alone).
//
// Requests come every millisecond (the fixed-rate benchmark's rate), so the server sleeps
// between them. Only the server's CPU is counted for a request; the sender's is not.
//
//	go run ./scripts/machine-cost [--dir DIR] [--n N]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/warrenmq/warren/cmd/warren/timerslack"
)

const (
	requestSize = 1000
	answerSize  = 60
	appendSize  = 1100
)

func main() {
	dir := flag.String("dir", os.TempDir(), "where to write the sync test's file (the file system of the data directory)")
	n := flag.Int("n", 3000, "syncs and requests to measure")
	slack := flag.Duration("timer-slack", 5*time.Millisecond, "the netpoll server's timer slack (Warren's --timer-slack default)")
	procs := flag.Int("procs", 1, "the netpoll server's GOMAXPROCS (Warren's at this load, with --adaptive-procs)")
	serve := flag.String("serve", "", "internal: serve requests in this mode (netpoll or blocking) and report on stdout")
	flag.Parse()

	if *serve != "" {
		if *serve == "netpoll" {
			runtime.GOMAXPROCS(*procs)
			// As the server does at start.
			if _, _, err := timerslack.Set(*slack); err != nil {
				fmt.Fprintln(os.Stderr, "machine-cost serve: timer slack:", err)
			}
		}
		if err := serveRequests(*serve, *n); err != nil {
			fmt.Fprintln(os.Stderr, "machine-cost serve:", err)
			os.Exit(1)
		}
		return
	}
	if err := report(*dir, *n, *slack, *procs); err != nil {
		fmt.Fprintln(os.Stderr, "machine-cost:", err)
		os.Exit(1)
	}
}

func report(dir string, n int, slack time.Duration, procs int) error {
	for _, prealloc := range []bool{false, true} {
		cpu, wall, err := syncCost(dir, n, prealloc)
		if err != nil {
			return err
		}
		how := "appended to a growing file"
		if prealloc {
			how = "written into an allocated file"
		}
		fmt.Printf("log sync (1,100 bytes %s, fdatasync, in %s): %.1f µs CPU, %.1f µs wall\n", how, dir, us(cpu), us(wall))
	}
	for _, mode := range []string{"netpoll", "blocking"} {
		cpu, err := requestCost(mode, n, slack, procs)
		if err != nil {
			return err
		}
		how := "a thread blocked in read(2)"
		if mode == "netpoll" {
			how = fmt.Sprintf("Go's netpoller, GOMAXPROCS %d, timer slack %v", procs, slack)
		}
		fmt.Printf("served request (%s): %.1f µs CPU\n", how, us(cpu))
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuTime is this process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syncCost writes and syncs n times, returning CPU and wall time per sync. With prealloc
// the file is first written out in full and synced, so the writes change no block map
// and no size.
func syncCost(dir string, n int, prealloc bool) (cpu, wall time.Duration, err error) {
	f, err := os.CreateTemp(dir, "machine-cost-*")
	if err != nil {
		return 0, 0, fmt.Errorf("create the sync test's file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if prealloc {
		if _, err := f.Write(make([]byte, n*appendSize)); err != nil {
			return 0, 0, fmt.Errorf("allocate: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, 0, fmt.Errorf("sync the allocation: %w", err)
		}
	}
	buf := make([]byte, appendSize)
	c0, t0 := cpuTime(), time.Now()
	for i := 0; i < n; i++ {
		if _, err := f.WriteAt(buf, int64(i*appendSize)); err != nil {
			return 0, 0, fmt.Errorf("write: %w", err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, fmt.Errorf("fdatasync: %w", err)
		}
	}
	return (cpuTime() - c0) / time.Duration(n), time.Since(t0) / time.Duration(n), nil
}

// requestCost starts this program again as a server in mode, sends it n requests a
// millisecond apart, and returns the server's CPU per request.
func requestCost(mode string, n int, slack time.Duration, procs int) (time.Duration, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, "--serve", mode, "--n", fmt.Sprint(n), "--timer-slack", slack.String(), "--procs", fmt.Sprint(procs))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start the server: %w", err)
	}
	defer cmd.Wait() //nolint:errcheck // waited for below; this only reaps on early return
	dec := json.NewDecoder(stdout)
	var hello struct{ Addr string }
	if err := dec.Decode(&hello); err != nil {
		return 0, fmt.Errorf("read the server's address: %w", err)
	}
	conn, err := net.Dial("tcp", hello.Addr)
	if err != nil {
		return 0, err
	}
	req, answer := make([]byte, requestSize), make([]byte, answerSize)
	next := time.Now()
	for i := 0; i < n; i++ {
		next = next.Add(time.Millisecond)
		time.Sleep(time.Until(next))
		if _, err := conn.Write(req); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(conn, answer); err != nil {
			return 0, err
		}
	}
	conn.Close()
	var result struct{ CPUPerRequest time.Duration }
	if err := dec.Decode(&result); err != nil {
		return 0, fmt.Errorf("read the server's result: %w", err)
	}
	return result.CPUPerRequest, cmd.Wait()
}

// serveRequests answers n requests on one connection, in one of two ways: through the Go
// runtime's netpoller (a goroutine reading a net.Conn) or on a thread blocked in read(2).
// Its CPU is counted from the first request to the last answer.
func serveRequests(mode string, n int) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(struct{ Addr string }{l.Addr().String()}); err != nil {
		return err
	}
	conn, err := l.Accept()
	if err != nil {
		return err
	}
	var rw io.ReadWriter = conn
	if mode == "blocking" {
		runtime.LockOSThread()
		// File returns a duplicate in blocking mode: reads park this thread in the kernel,
		// not a goroutine in the netpoller.
		f, err := conn.(*net.TCPConn).File()
		if err != nil {
			return err
		}
		rw = rawFD(f.Fd())
	}
	req, answer := make([]byte, requestSize), make([]byte, answerSize)
	if _, err := io.ReadFull(rw, req); err != nil {
		return err
	}
	c0 := cpuTime()
	if _, err := rw.Write(answer); err != nil {
		return err
	}
	for i := 1; i < n; i++ {
		if _, err := io.ReadFull(rw, req); err != nil {
			return err
		}
		if _, err := rw.Write(answer); err != nil {
			return err
		}
	}
	per := (cpuTime() - c0) / time.Duration(n-1)
	return enc.Encode(struct{ CPUPerRequest time.Duration }{per})
}

// rawFD reads and writes a blocking descriptor with plain system calls.
type rawFD uintptr

func (fd rawFD) Read(p []byte) (int, error) {
	n, err := rawCall(syscall.SYS_READ, fd, p)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (fd rawFD) Write(p []byte) (int, error) { return rawCall(syscall.SYS_WRITE, fd, p) }

// rawCall makes a system call without telling the Go runtime, so that its monitor thread
// does not hand the thread's processor to another thread while the call blocks: what a
// plain C program pays. It retries a call a signal interrupted (the runtime's preemption
// signals come every 10 ms to a goroutine that seems to run that long).
func rawCall(trap uintptr, fd rawFD, p []byte) (int, error) {
	for {
		n, _, errno := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		default:
			return 0, errno
		}
	}
}
