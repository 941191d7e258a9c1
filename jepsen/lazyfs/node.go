package lazyfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a file or directory: go-fuse's loopback node, with what
// touches file contents and sizes taken over.
type node struct {
	fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
)

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// passFlags are the open flags the backing file is not opened with:
// lazyfs does appends' offsets (the kernel's) and syncs itself, and
// creation and truncation apart.
const passFlags = syscall.O_ACCMODE | syscall.O_APPEND | fuse.FMODE_EXEC |
	syscall.O_SYNC | syscall.O_DSYNC | syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h, e := n.fs.open(n.backingPath(), n.EmbeddedInode(), flags)
	return h, 0, e
}

// open opens a handle on the backing file at path, the kernel's inode.
func (f *FS) open(path string, inode *fs.Inode, flags uint32) (*handle, syscall.Errno) {
	if f.isDown() {
		return nil, syscall.EIO
	}
	if flags&syscall.O_DIRECT != 0 {
		return nil, syscall.EINVAL // doc.go
	}
	fd, err := syscall.Open(path, int(flags)&^passFlags|syscall.O_RDWR|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, errno(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, errno(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.fileOf(st.Ino)
	d.inode = inode
	if flags&syscall.O_TRUNC != 0 {
		if err := syscall.Ftruncate(fd, 0); err != nil {
			syscall.Close(fd)
			return nil, errno(err)
		}
		d.truncate(0)
	}
	return &handle{fs: f, file: d, ino: st.Ino, fd: fd,
		sync: flags&syscall.O_DSYNC != 0, epoch: f.epoch}, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.fs.isDown() {
		return nil, nil, 0, syscall.EIO
	}
	if flags&syscall.O_DIRECT != 0 {
		return nil, nil, 0, syscall.EINVAL // doc.go
	}
	plain := flags &^ (syscall.O_SYNC | syscall.O_DSYNC | syscall.O_APPEND)
	in, fh, _, e := n.LoopbackNode.Create(ctx, name, plain, mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	if r, ok := fh.(fs.FileReleaser); ok {
		r.Release(ctx)
	}
	// The new inode has no path yet: the kernel links it on return.
	h, e := n.fs.open(filepath.Join(n.backingPath(), name), in, flags&^(syscall.O_CREAT|syscall.O_EXCL))
	if e != 0 {
		return nil, nil, 0, e
	}
	n.fs.mu.Lock()
	out.Size = uint64(n.fs.sizeOf(out.Ino, int64(out.Size)))
	n.fs.mu.Unlock()
	return in, h, 0, 0
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	in, e := n.LoopbackNode.Lookup(ctx, name, out)
	if e == 0 {
		n.seeHeld(&out.Attr)
	}
	return in, e
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Getattr(ctx, out)
	}
	if e := n.LoopbackNode.Getattr(ctx, nil, out); e != 0 {
		return e
	}
	n.seeHeld(&out.Attr)
	return 0
}

// seeHeld sets a regular file's size in a (filled from its backing
// file) to include its held writes.
func (n *node) seeHeld(a *fuse.Attr) {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	n.fs.mu.Lock()
	a.Size = uint64(n.fs.sizeOf(a.Ino, int64(a.Size)))
	n.fs.mu.Unlock()
}

// Setattr truncates itself, through the handle when there is one, and
// leaves modes, owners and times to the loopback node.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.fs.isDown() {
		return syscall.EIO
	}
	if size, ok := in.GetSize(); ok {
		var e syscall.Errno
		if h, ok := f.(*handle); ok {
			e = h.truncate(int64(size))
		} else {
			e = n.truncate(int64(size))
		}
		if e != 0 {
			return e
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	if e := n.LoopbackNode.Setattr(ctx, nil, in, out); e != 0 {
		return e
	}
	n.seeHeld(&out.Attr)
	return 0
}

// truncate truncates the file by its path (no handle given).
func (n *node) truncate(size int64) syscall.Errno {
	p := n.backingPath()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return errno(err)
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if err := syscall.Truncate(p, size); err != nil {
		return errno(err)
	}
	if f := n.fs.files[st.Ino]; f != nil {
		f.truncate(size)
	}
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.fs.isDown() {
		return syscall.EIO
	}
	var st syscall.Stat_t
	lerr := syscall.Lstat(filepath.Join(n.backingPath(), name), &st)
	if e := n.LoopbackNode.Unlink(ctx, name); e != 0 {
		return e
	}
	if lerr == nil && st.Nlink <= 1 {
		n.fs.forget(st.Ino)
	}
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if n.fs.isDown() {
		return syscall.EIO
	}
	var src, dst syscall.Stat_t
	serr := syscall.Lstat(filepath.Join(n.backingPath(), name), &src)
	derr := syscall.Lstat(filepath.Join(np.backingPath(), newName), &dst)
	if e := n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags); e != 0 {
		return e
	}
	replaced := serr == nil && derr == nil && dst.Ino != src.Ino && flags&fs.RENAME_EXCHANGE == 0
	if replaced && dst.Nlink <= 1 {
		n.fs.forget(dst.Ino)
	}
	return 0
}

// Statx is left to the kernel, which then asks Getattr: that one
// knows the held writes.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

// Tmpfile and CopyFileRange would reach the backing files around the
// held writes; the kernel falls back to plain opens and copies.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle,
	offOut, size, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}
