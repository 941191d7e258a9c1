package lazyfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Mounted is a lazyfs mount of a backing directory.
type Mounted struct {
	*FS
	dir, backing string
	server       *fuse.Server
}

// Supported reports why lazyfs cannot mount here, or nil: mounting FUSE
// takes root and /dev/fuse.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("lazyfs mounts FUSE file systems, which takes root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("lazyfs needs /dev/fuse: %w", err)
	}
	return nil
}

// Mount serves backing at dir (both existing directories) through
// lazyfs, until Unmount.
func Mount(dir, backing string) (*Mounted, error) {
	m := &Mounted{FS: newFS(), dir: dir, backing: backing}
	if err := m.mount(); err != nil {
		return nil, err
	}
	return m, nil
}

// Dir is where the file system is mounted.
func (m *Mounted) Dir() string { return m.dir }

func (m *Mounted) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(m.backing, &st); err != nil {
		return fmt.Errorf("lazyfs backing directory: %w", err)
	}
	root := &fs.LoopbackRoot{Path: m.backing, Dev: st.Dev}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: m.FS}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	// Nothing about names or attributes is cached: sizes change with
	// held writes and with crashes.
	var zero time.Duration
	server, err := fs.Mount(m.dir, root.RootNode, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:             "lazyfs",
			Name:               "lazyfs",
			DirectMount:        true,
			DisableReadDirPlus: true,
			DisableXAttrs:      true,
		},
	})
	if err != nil {
		return fmt.Errorf("lazyfs mount %s: %w", m.dir, err)
	}
	m.server = server
	return nil
}

// Unmount unmounts the file system. Writes held are dropped, as by a
// crash: nothing syncs them any more.
//
// It does not wait for the server's goroutines to see the connection
// end, as fuse.Server.Unmount does: the kernel ends it only when the
// last reference to the mount goes, and a mount namespace created
// meanwhile by another process on the machine holds one for as long
// as it lives.
func (m *Mounted) Unmount() error {
	var err error
	for wait := time.Millisecond; wait < time.Second; wait *= 2 {
		// Files closed just before may still be released by the kernel.
		if err = syscall.Unmount(m.dir, 0); err != syscall.EBUSY {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		return fmt.Errorf("lazyfs unmount %s: %w", m.dir, err)
	}
	m.Crash(nil)
	return nil
}

// Remount unmounts and mounts again, so that the kernel holds nothing of
// the files from before, and restarts the file system: a reboot.
func (m *Mounted) Remount() error {
	if err := m.Unmount(); err != nil {
		return err
	}
	m.Restart()
	return m.mount()
}
