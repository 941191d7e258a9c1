// Package lazyfs is a FUSE loopback file system that loses what was not
// synced: a power cut for tests of crash consistency.
//
// The model, which is that of a disk with a volatile write cache and a
// file system whose metadata is always durable:
//
//   - A write to a file is held in memory, per file, until the file is
//     synced: fsync or fdatasync on any of its descriptors writes every
//     write held for the file to the backing directory, in order. Closing
//     a file does not sync it. A descriptor opened with O_SYNC or O_DSYNC
//     syncs the file after each of its writes.
//   - Reads and sizes see the writes held: a read is the backing file's
//     bytes with the held writes laid over them, in the order made, and a
//     file's size is the larger of the backing file's and the end of the
//     last held write.
//   - Metadata is durable at once: create, mkdir, rename, link, unlink,
//     truncate and fallocate go to the backing directory when they are
//     made. A truncate also cuts the held writes at the new size, so that
//     they never bring back what it removed.
//   - FS.Crash is the power cut: every write not yet synced is dropped,
//     or, if asked, a random in-order prefix of each file's held writes is
//     kept, the last of them possibly cut at a random byte (the write-back
//     of a disk torn part way). Descriptors opened before the crash fail
//     with EIO from then on (but for their attributes), as the processes
//     holding them would be dead. Until FS.Restart (the reboot) the file
//     system is down: opens and changes of names and sizes fail with EIO
//     too, so that nothing a dead process tries after the cut lands.
//     Files opened after the restart see what survived.
//
// O_DIRECT is refused (EINVAL), as by file systems without direct I/O.
// Through FUSE the kernel sends direct reads and writes of a file apart
// from its cached ones, and with both on one file across crashes and
// remounts a cached read was seen to wait for ever in the kernel. Warren's log then
// writes through the page cache and syncs with fdatasync, as it does on
// any file system that refuses its probe (raftq/wal/direct.go). The
// backing directory is a scratch area: what survives is decided by
// lazyfs, so it never syncs the backing files itself.
//
// The kernel caches pages of files served through FUSE. Held writes go to
// the kernel's cache as they are written, so that cache agrees with the
// view above until a crash changes it; Crash then tells the kernel to drop
// what it caches of every file that lost writes, and attributes are never
// cached. Remounting (Mounted.Remount) starts from a clean kernel state
// too; a process must not use the mount it serves when it exits, or its
// exit waits for ever on the answer it can no longer give.
package lazyfs
