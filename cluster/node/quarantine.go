package node

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Quarantine: what a node does with queue members whose storage is
// damaged (docs/storage.md tells the operator's side).
//
// A member whose log lost entries must not take part in its group as if
// nothing happened: Raft counts on every voter keeping what it
// acknowledged (entries, its term, its vote), and a voter that comes back
// with less can elect a stale candidate, which then overwrites committed
// entries. Nor can it simply start empty under its name: an empty voter
// grants its vote to any candidate.
//
// So the node sets the damaged files aside, under quarantine/ in its data
// directory, and does not start those members. For each group, once a
// leader is reachable, it has the leader remove it from the group's
// configuration, opens an empty member, and joins again through the add
// member path (membership.go): a non-voter until it has caught up, then
// promoted. From removal to promotion the member counts in no quorum and
// no election, so it never votes from an empty log.
//
// The list of groups still to re-sync is kept on disk (quarantine/pending)
// so that a restart midway does not open an emptied member as a voter.
// A group leaves the list once re-synced, or once the metadata, caught
// up, says the queue is gone or has no member here any more.

// quarantineDir is where damaged files are set aside and the pending list
// kept, under the data directory.
const quarantineDir = "quarantine"

// quarantine is this node's list of queue groups awaiting a re-sync.
type quarantine struct {
	dir string // <data dir>/quarantine
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]*quarantined // by queue ID
	// kick (capacity one) wakes the re-sync loop (resync.go).
	kick chan struct{}
}

// quarantined is one group awaiting its re-sync.
type quarantined struct {
	cause string
	// open: its empty member is open and catching up, a non-voter.
	open bool
	// waiting says why the re-sync has not finished; empty while it
	// has not been tried.
	waiting string
	logged  string // the last reason logged
	// since is when this start of the node found it quarantined.
	since time.Time
}

// quietWait is how long a quarantined group's reasons to wait go
// unlogged: a node just started knows no leader for a moment.
const quietWait = 5 * time.Second

// openQuarantine reads the pending list under dataDir, if any.
func openQuarantine(dataDir string, log *slog.Logger) (*quarantine, error) {
	qz := &quarantine{
		dir:     filepath.Join(dataDir, quarantineDir),
		log:     log,
		pending: map[string]*quarantined{},
		kick:    make(chan struct{}, 1),
	}
	f, err := os.Open(qz.listPath())
	if errors.Is(err, os.ErrNotExist) {
		return qz, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the quarantined queue groups: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, cause, _ := strings.Cut(sc.Text(), "\t")
		if id != "" {
			qz.pending[id] = &quarantined{cause: cause, since: time.Now()}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the quarantined queue groups: %w", err)
	}
	if len(qz.pending) > 0 {
		log.Error("this node holds queue members quarantined after storage damage: they do not vote or lead until re-synced from their groups",
			"groups", len(qz.pending), "files_set_aside", qz.dir)
	}
	return qz, nil
}

func (qz *quarantine) listPath() string { return filepath.Join(qz.dir, "pending") }

// save writes the pending list, atomically; qz.mu held.
func (qz *quarantine) save() error {
	if err := os.MkdirAll(qz.dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(qz.pending)) {
		fmt.Fprintf(&b, "%s\t%s\n", id, strings.ReplaceAll(qz.pending[id].cause, "\n", " "))
	}
	tmp := qz.listPath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, qz.listPath())
	}
	if err == nil {
		err = syncDir(qz.dir)
	}
	if err != nil {
		return fmt.Errorf("save the quarantined queue groups: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// add puts groups on the pending list, durably, before their files are
// moved: a crash in between finds them listed.
func (qz *quarantine) add(ids []string, cause error) error {
	qz.mu.Lock()
	defer qz.mu.Unlock()
	for _, id := range ids {
		if qz.pending[id] == nil {
			qz.pending[id] = &quarantined{cause: cause.Error(), since: time.Now()}
		}
	}
	err := qz.save()
	qz.wake()
	return err
}

// aside is a new directory, named by the time, to move damaged files into.
func (qz *quarantine) aside() (string, error) {
	dir := filepath.Join(qz.dir, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make a directory for the damaged files: %w", err)
	}
	return dir, nil
}

// setAsideLog quarantines every group of a node whose queues' write-ahead
// log is damaged (cause): the groups are those with a directory under
// quorum/; the log and those directories are moved aside whole.
func (qz *quarantine) setAsideLog(dataDir string, cause error) error {
	quorum := filepath.Join(dataDir, "quorum")
	entries, err := os.ReadDir(quorum)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("list the queues' groups: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	if err := qz.add(ids, cause); err != nil {
		return err
	}
	to, err := qz.aside()
	if err != nil {
		return err
	}
	for _, name := range []string{"wal", "quorum"} {
		if err := os.Rename(filepath.Join(dataDir, name), filepath.Join(to, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("set the damaged %s aside: %w", name, err)
		}
	}
	qz.log.Error("the queues' write-ahead log is damaged: set aside with the queues' snapshots; this node's queue members stay out of their groups' votes until each is re-synced from the others",
		"groups", len(ids), "set_aside", to, "cause", cause)
	return nil
}

// setAsideGroup quarantines group id, whose member's storage in dir was
// found damaged (cause) as it opened; its directory is moved aside.
func (qz *quarantine) setAsideGroup(id, dir string, cause error) error {
	if err := qz.add([]string{id}, cause); err != nil {
		return err
	}
	to, err := qz.aside()
	if err != nil {
		return err
	}
	if err := os.Rename(dir, filepath.Join(to, filepath.Base(dir))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("set the damaged member's files aside: %w", err)
	}
	qz.log.Error("a queue member's storage is damaged: its files are set aside, and it stays out of the group's votes until re-synced from the others",
		"group", id, "set_aside", to, "cause", cause)
	return nil
}

// holds reports whether group id awaits its re-sync.
func (qz *quarantine) holds(id string) bool {
	qz.mu.Lock()
	defer qz.mu.Unlock()
	return qz.pending[id] != nil
}

// role is how group id's member here is to be shown: quarantined (not
// open), re-syncing (open, catching up) or "" (not quarantined).
func (qz *quarantine) role(id string) string {
	qz.mu.Lock()
	defer qz.mu.Unlock()
	switch p := qz.pending[id]; {
	case p == nil:
		return ""
	case p.open:
		return roleResyncing
	}
	return roleQuarantined
}

const (
	roleQuarantined = "quarantined"
	roleResyncing   = "re-syncing"
)

// ids are the groups awaiting a re-sync, sorted.
func (qz *quarantine) ids() []string {
	qz.mu.Lock()
	defer qz.mu.Unlock()
	return slices.Sorted(maps.Keys(qz.pending))
}

// setOpen notes that group id's empty member is open, catching up.
func (qz *quarantine) setOpen(id string) {
	qz.mu.Lock()
	defer qz.mu.Unlock()
	if p := qz.pending[id]; p != nil {
		p.open = true
	}
}

// wait notes why group id is not re-synced yet, and reports whether that
// is news to log (once, not on every try; not in the node's first
// seconds).
func (qz *quarantine) wait(id, why string) bool {
	qz.mu.Lock()
	defer qz.mu.Unlock()
	p := qz.pending[id]
	if p == nil {
		return false
	}
	p.waiting = why
	if p.logged == why || time.Since(p.since) < quietWait {
		return false
	}
	p.logged = why
	return true
}

// done takes group id off the pending list.
func (qz *quarantine) done(id string) error {
	qz.mu.Lock()
	defer qz.mu.Unlock()
	if qz.pending[id] == nil {
		return nil
	}
	delete(qz.pending, id)
	return qz.save()
}

func (qz *quarantine) wake() {
	select {
	case qz.kick <- struct{}{}:
	default:
	}
}

// QuarantineStatus is what a node says of its quarantined queue members.
type QuarantineStatus struct {
	// Groups awaiting a re-sync; Resyncing of them have their member
	// open and catching up as a non-voter.
	Groups, Resyncing int
	// Waiting is, per queue ID, why its re-sync has not finished.
	Waiting map[string]string
}

// Quarantine reports this node's quarantined queue members (none on a
// standalone node).
func (n *Node) Quarantine() QuarantineStatus {
	if n.cluster == nil {
		return QuarantineStatus{}
	}
	qz := n.cluster.quar
	qz.mu.Lock()
	defer qz.mu.Unlock()
	st := QuarantineStatus{Groups: len(qz.pending), Waiting: map[string]string{}}
	for id, p := range qz.pending {
		if p.open {
			st.Resyncing++
		}
		if p.waiting != "" {
			st.Waiting[id] = p.waiting
		}
	}
	return st
}
