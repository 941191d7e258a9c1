package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The full-disk fault runs one node's data directory out of space. With
// the fault selected, the harness mounts a small tmpfs on the data
// directory of one node (chosen by the seed) before the cluster starts;
// the fault fills it with a file until a write fails with ENOSPC. With
// the node's disk alarm on, the alarm blocks publishers until the space
// is back, and the node may never see a failed write; with it turned off
// (half the faults, by seed) the node's writes fail, and it must stop:
// its logs take no write after a failed one, and it exits with an error,
// not a panic. The schedule says which happened. The exit is expected, not a
// crash, but a panic in the node's log during the fault is one. Healing
// removes the file and starts the node again if it stopped: it must come
// back and lose nothing confirmed.

// smallDiskSize is the size of the tmpfs the full-disk fault fills: room
// for a run's data, well above the nodes' default 50MB disk-free-limit.
const smallDiskSize = "256m"

// fillerName is the file that takes the small disk's space.
const fillerName = "jepsen-filler"

// tmpfsMagic is tmpfs's file system type in statfs.
const tmpfsMagic = 0x01021994

// prepareSmallDisk mounts the small tmpfs on a node's data directory when
// the full-disk fault is among the faults, and returns its unmounting.
func prepareSmallDisk(cfg config) (unmount func(), err error) {
	if !slices.Contains(cfg.faults, "full-disk") {
		return func() {}, nil
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the full-disk fault mounts a tmpfs: it needs root")
	}
	k := int(cfg.seed % uint64(cfg.nodes))
	dir := filepath.Join(cfg.dir, fmt.Sprintf("warren-%d", k), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := sh("mount", "-t", "tmpfs", "-o", "size="+smallDiskSize, "jepsen-small-disk", dir); err != nil {
		return nil, err
	}
	return func() { exec.Command("umount", dir).Run() }, nil
}

// onSmallDisk says whether dir is on a tmpfs.
func onSmallDisk(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == tmpfsMagic
}

// fillDisk writes path until the file system holding it has no space
// left, and returns how much it wrote. ENOSPC is the goal, not an error.
func fillDisk(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, err := f.Write(buf)
		total += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// panicLine is the first line of text that starts a Go panic or fatal
// runtime error, or "".
var panicStart = regexp.MustCompile(`(?m)^(panic: |fatal error: ).*$`)

func panicLine(text string) string {
	return panicStart.FindString(text)
}

// stoppingWait is how long the heal waits for a node that logged its
// storage failure to exit: its own bound is 5 s.
const stoppingWait = 15 * time.Second

// storageFailure is the line of a node's log that says it stops because
// its storage failed, or "".
func storageFailure(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "storage failed") {
			return l
		}
	}
	return ""
}

// lastLine is text's last non-empty line.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return lines[len(lines)-1]
}

// logSince is a node's log from offset on.
func logSince(nd *node, offset int64) string {
	f, err := os.Open(filepath.Join(nd.dir, "warren.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func logSize(nd *node) int64 {
	fi, err := os.Stat(filepath.Join(nd.dir, "warren.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// fullDisk fills the small disk of the node that has one. Half the time,
// chosen by the seed, it first turns the node's disk alarm off (a
// disk-free-limit of 0), so that publishes go on and the node's writes
// meet ENOSPC; otherwise the alarm, at the default 50MB, blocks publishers
// first, and the node may see no failed write at all.
func (n *nemesis) fullDisk(ctx context.Context) ([]int, string, func() error, error) {
	i := slices.IndexFunc(n.c.nodes, func(nd *node) bool { return onSmallDisk(filepath.Join(nd.dir, "data")) })
	if i < 0 {
		return nil, "", nil, errors.New("no node's data directory is on a small disk")
	}
	nd := n.c.nodes[i]
	alarmOff := n.rng.IntN(2) == 0
	offset := logSize(nd)
	nd.expectExit() // stopping on ENOSPC is what it should do
	filler := filepath.Join(nd.dir, "data", fillerName)
	heal := func() error { return n.unfill(nd, filler, offset, alarmOff) }
	how := "disk alarm on"
	if alarmOff {
		how = "disk alarm off"
		if err := n.setDiskLimit(ctx, i, "0"); err != nil {
			return []int{i}, how, heal, err
		}
	}
	wrote, err := fillDisk(filler)
	how = fmt.Sprintf("%s, %d MiB written until no space was left", how, wrote>>20)
	if err != nil || !alarmOff {
		return []int{i}, how, heal, err
	}
	confirmed, err := n.pressDisk(ctx, (i+1)%len(n.c.nodes), 10*time.Second) // diskpress.go
	how += fmt.Sprintf(", then %d of %d scratch messages of %d KiB confirmed", confirmed, pressBytes/pressMessage, pressMessage>>10)
	return []int{i}, how, heal, err
}

// setDiskLimit sets node i's disk free limit with warrenctl.
func (n *nemesis) setDiskLimit(ctx context.Context, i int, limit string) error {
	out, err := n.c.ctlNode(ctx, n.warrenctl, i, "set", "disk-free-limit", limit)
	if err != nil {
		return fmt.Errorf("set disk-free-limit %s: %w: %s", limit, err, firstLine(out))
	}
	return nil
}

// unfill removes the filler, judges what the node wrote to its log while
// the disk was full, and starts the node again if it stopped.
func (n *nemesis) unfill(nd *node, filler string, offset int64, alarmOff bool) error {
	rmErr := os.Remove(filler)
	text := logSince(nd, offset)
	if p := panicLine(text); p != "" {
		nd.mu.Lock()
		nd.crashes = append(nd.crashes, fmt.Sprintf("%s panicked on a full disk: %s", nd.name, p))
		nd.mu.Unlock()
	}
	var pressErr error
	if alarmOff {
		pressErr = n.unpress()
	}
	// A node whose storage failed tells its clients, then exits within
	// seconds (cmd/warren's storageStopWait): wait for it.
	stopping := storageFailure(text)
	for deadline := time.Now().Add(stoppingWait); stopping != "" && nd.running() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if !nd.running() {
		why := stopping
		if why == "" {
			why = lastLine(text)
		}
		n.note("full-disk: %s stopped: %s", nd.name, why)
		return errors.Join(rmErr, pressErr, nd.restart())
	}
	// Still up: an exit from now on is a crash again.
	nd.mu.Lock()
	nd.ending = false
	nd.mu.Unlock()
	alarm := "no disk alarm in its log"
	if strings.Contains(text, "resource alarm raised") {
		alarm = "its disk alarm blocked publishers"
	}
	n.note("full-disk: %s kept running (%s)", nd.name, alarm)
	if alarmOff {
		i := slices.Index(n.c.nodes, nd)
		return errors.Join(rmErr, pressErr, n.setDiskLimit(context.Background(), i, "50MB"))
	}
	return rmErr
}
