package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// LoginFrom says which part of a client certificate names the user that
// logs in with EXTERNAL (RabbitMQ's ssl_cert_login_from).
type LoginFrom string

const (
	// LoginFromCommonName: the subject's CN.
	LoginFromCommonName LoginFrom = "common_name"
	// LoginFromDistinguishedName: the whole subject, as RabbitMQ prints
	// it ("CN=alice,O=Example").
	LoginFromDistinguishedName LoginFrom = "distinguished_name"
	// LoginFromSubjectAltName: the first DNS name, else e-mail address,
	// else URI of the subject alternative names.
	LoginFromSubjectAltName LoginFrom = "subject_alternative_name"
)

// ParseLoginFrom checks a --ssl-cert-login-from value.
func ParseLoginFrom(s string) (LoginFrom, error) {
	switch f := LoginFrom(s); f {
	case LoginFromCommonName, LoginFromDistinguishedName, LoginFromSubjectAltName:
		return f, nil
	}
	return "", fmt.Errorf("unknown certificate login field %q (common_name, distinguished_name or subject_alternative_name)", s)
}

// certUser is the user name a verified client certificate logs in as.
func certUser(cert *x509.Certificate, from LoginFrom) string {
	switch from {
	case LoginFromDistinguishedName:
		return cert.Subject.String() // RFC 4514, most specific first: "CN=alice,O=Example"
	case LoginFromSubjectAltName:
		switch {
		case len(cert.DNSNames) > 0:
			return cert.DNSNames[0]
		case len(cert.EmailAddresses) > 0:
			return cert.EmailAddresses[0]
		case len(cert.URIs) > 0:
			return cert.URIs[0].String()
		}
		return ""
	}
	return cert.Subject.CommonName
}

// startTLS completes the TLS handshake of a connection accepted on an
// AMQPS listener, within the handshake's deadline, and keeps the client's
// certificate when it presented one the listener verified. A plain-TCP
// client on the TLS port fails here: its protocol header is no TLS
// record.
func (c *conn) startTLS() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	if err := tc.HandshakeContext(context.Background()); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	st := tc.ConnectionState()
	c.tls = &st
	if len(st.VerifiedChains) > 0 {
		c.peerCert = st.PeerCertificates[0]
	}
	c.log = c.log.With("tls", tls.VersionName(st.Version))
	return nil
}

// offeredMechanisms are the SASL mechanisms connection.start offers:
// EXTERNAL only on a TLS connection whose client presented a certificate
// the listener verified, as rabbitmq_auth_mechanism_ssl offers it.
func (c *conn) offeredMechanisms() string {
	if c.peerCert != nil {
		return mechanisms + " EXTERNAL"
	}
	return mechanisms
}
