package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminCredentialsNeedTheClusterFiles: without warrenctl's CA,
// certificate and key, or with files that hold none, the harness says
// which is missing instead of talking to the nodes unauthenticated.
func TestAdminCredentialsNeedTheClusterFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		auth []string
		want string
	}{
		{nil, "needs --ca, --cert and --key"},
		{[]string{"--ca", empty, "--cert", empty}, "needs --ca, --cert and --key"},
		{[]string{"--ca", filepath.Join(dir, "missing.pem"), "--cert", empty, "--key", empty}, "the cluster CA"},
		{[]string{"--ca", empty, "--cert", empty, "--key", empty}, "holds no certificate"},
	} {
		_, err := adminCredentials(tc.auth)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("adminCredentials(%q) = %v, want an error saying %q", tc.auth, err, tc.want)
		}
	}
}
