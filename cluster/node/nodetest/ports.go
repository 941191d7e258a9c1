package nodetest

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// FreeAddr is a loopback address whose port is free for TCP and UDP (a
// gossip address needs both) and lies below the kernel's ephemeral range
// (32768 and up by default). A port the kernel handed out for ":0" can be
// taken by any outgoing connection's source, or another test's listener,
// while a node that had it is stopped: its restart on the same port then
// failed with "address already in use" (CI saw it, with processes and with
// in-process nodes). No port is handed out twice by one test binary.
func FreeAddr(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 10000 + rand.IntN(22000)
		if portsGiven[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		portsGiven[port] = true
		return addr
	}
	t.Fatal("no free port found")
	return ""
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)
