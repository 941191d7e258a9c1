package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// The corrupt fault: a node is killed (SIGKILL), some of its queue
// storage files are damaged while it is down, and it is started again.
// Which files, where in them and how many (one to three) come from the
// seed. The files are found by walking the node's data directory: the
// write-ahead log's segments (wal/*.wal) and the queues' snapshots
// (quorum/*/snapshots/*/state.bin). The metadata group's store is left
// alone: Warren does not quarantine it (docs/storage.md).
//
// A damage is either bytes flipped (one to eight, within the file's
// written part: up to its last non-zero byte, since a segment is
// allocated ahead with zeros) or the file cut short, somewhere in the
// second half of its written part. Flipped bytes before intact records,
// a cut segment that is not the last and a damaged latest snapshot are
// found, and the node quarantines its queue members and re-syncs them. A
// cut at the end of the last segment looks like a write torn by the
// kill, and is cut off as one: it drops records the node had synced, which
// Raft does not allow for (docs/storage.md, "What a cut tail hides").

// corruptFault kills a random node, damages its files and returns the
// damage done (as the fault's shape) and the restart that heals it.
func (n *nemesis) corruptFault(context.Context) ([]int, string, func() error, error) {
	i := n.rng.IntN(len(n.c.nodes))
	nd := n.c.nodes[i]
	if err := nd.kill(); err != nil {
		return []int{i}, "", nd.restart, err
	}
	done, err := damageFiles(n.rng, nd.dir)
	return []int{i}, strings.Join(done, "; "), nd.restart, err
}

// damageable lists the files under dir/data the corrupt fault may damage,
// in lexical order (so that the seed picks the same ones again).
func damageable(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(filepath.Join(dir, "data"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "quarantine" {
			return filepath.SkipDir // files set aside by an earlier damage: no longer read
		}
		if d.IsDir() {
			return nil
		}
		parent := filepath.Base(filepath.Dir(path))
		grand := filepath.Base(filepath.Dir(filepath.Dir(path)))
		switch {
		case parent == "wal" && strings.HasSuffix(path, ".wal"):
			files = append(files, path)
		case d.Name() == "state.bin" && grand == "snapshots":
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// damageFiles damages one to three of dir's damageable files and says
// what it did to each, with paths relative to dir.
func damageFiles(rng *rand.Rand, dir string) ([]string, error) {
	files, err := damageable(dir)
	if err != nil {
		return nil, fmt.Errorf("list the files to damage: %w", err)
	}
	if len(files) == 0 {
		return []string{"no file to damage"}, nil
	}
	var done []string
	for range 1 + rng.IntN(3) {
		path := files[rng.IntN(len(files))]
		what, err := damageFile(rng, path)
		rel, _ := filepath.Rel(dir, path)
		if err != nil {
			return done, fmt.Errorf("damage %s: %w", rel, err)
		}
		done = append(done, rel+": "+what)
	}
	return done, nil
}

// damageFile flips bytes in path or cuts it short, and says which.
func damageFile(rng *rand.Rand, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	written := int64(len(bytes.TrimRight(b, "\x00")))
	if written == 0 {
		return "empty, left alone", nil
	}
	if rng.IntN(4) == 0 {
		to := written/2 + rng.Int64N(written-written/2)
		if err := os.Truncate(path, to); err != nil {
			return "", err
		}
		return fmt.Sprintf("cut to %d bytes (written part %d, file %d)", to, written, len(b)), nil
	}
	at := rng.Int64N(written)
	n := min(int64(1+rng.IntN(8)), int64(len(b))-at)
	patch := make([]byte, n)
	for k := range patch {
		patch[k] = b[at+int64(k)] ^ byte(1+rng.IntN(255))
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	_, err = f.WriteAt(patch, at)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes flipped at offset %d (written part %d)", n, at, written), nil
}
