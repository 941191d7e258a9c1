package server

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
)

// TestCertUser: EXTERNAL's user name from each part of a certificate that
// --ssl-cert-login-from can name.
func TestCertUser(t *testing.T) {
	u, _ := url.Parse("spiffe://example/app")
	cert := &x509.Certificate{
		Subject:        pkix.Name{CommonName: "alice", Organization: []string{"Example"}},
		EmailAddresses: []string{"alice@example.com"},
		URIs:           []*url.URL{u},
	}
	for _, tc := range []struct {
		from LoginFrom
		want string
	}{
		{LoginFromCommonName, "alice"},
		{LoginFromDistinguishedName, "CN=alice,O=Example"},
		{LoginFromSubjectAltName, "alice@example.com"},
	} {
		if got := certUser(cert, tc.from); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.from, got, tc.want)
		}
	}
	cert.DNSNames = []string{"app.example"}
	if got := certUser(cert, LoginFromSubjectAltName); got != "app.example" {
		t.Errorf("a DNS name comes first: %q", got)
	}
}
