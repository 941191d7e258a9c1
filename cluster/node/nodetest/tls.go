package nodetest

import (
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/pki"
)

// NewCA makes a cluster CA in a temporary folder and returns the folder.
func NewCA(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := pki.InitCA(dir, "test cluster CA"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Issue issues a certificate from the CA in caDir and loads it.
func Issue(t testing.TB, caDir string, req pki.Request) (*pki.Store, pki.Files) {
	t.Helper()
	cert, key, err := pki.Issue(caDir, t.TempDir(), req)
	if err != nil {
		t.Fatal(err)
	}
	files := pki.Files{Cert: cert, Key: key, CA: filepath.Join(caDir, pki.CACertFile)}
	s, err := pki.Load(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, files
}

// TLS gives each node a node certificate from the CA in caDir, so that
// the cluster runs with mutual TLS between its nodes, and encrypts gossip
// with key (nil: none).
func TLS(t testing.TB, caDir string, key []byte) Option {
	return func(c *node.ClusterConfig) {
		c.TLS, _ = Issue(t, caDir, pki.Request{Kind: pki.Node, Name: c.NodeName})
		c.GossipKey = key
	}
}
