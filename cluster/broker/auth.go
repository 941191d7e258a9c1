package broker

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"regexp"
	"slices"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// HashPassword returns the password's hash in RabbitMQ's
// rabbit_password_hashing_sha256 layout, base64(salt ++ sha256(salt ++
// password)) with a 4-byte random salt, so that definitions exported from
// RabbitMQ can be imported as they are.
func HashPassword(password string) string {
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		panic(fmt.Sprintf("read random salt: %v", err))
	}
	return hashWithSalt(salt[:], password)
}

func hashWithSalt(salt []byte, password string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(password))
	return base64.StdEncoding.EncodeToString(append(append([]byte{}, salt...), h.Sum(nil)...))
}

// CheckPassword reports whether password matches hash, in constant time.
func CheckPassword(hash, password string) bool {
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(raw) != 4+sha256.Size {
		return false
	}
	want := hashWithSalt(raw[:4], password)
	return subtle.ConstantTimeCompare([]byte(want), []byte(hash)) == 1
}

// permission is a user's access to one vhost, its patterns compiled.
type permission struct {
	rec                    catalog.Permission
	configure, write, read *regexp.Regexp
}

// compilePattern compiles a permission pattern. As in RabbitMQ, the empty
// string grants nothing (it is a synonym for ^$, which no resource name
// matches).
func compilePattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		p = "^$"
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("permission pattern %q: %w", p, err)
	}
	return re, nil
}

// Access is the kind of permission an operation needs.
type Access uint8

const (
	Configure Access = iota
	Write
	Read
)

func (a Access) String() string {
	switch a {
	case Configure:
		return "configure"
	case Write:
		return "write"
	default:
		return "read"
	}
}

func (p *permission) allows(a Access, name string) bool {
	if p == nil {
		return false
	}
	switch a {
	case Configure:
		return p.configure.MatchString(name)
	case Write:
		return p.write.MatchString(name)
	default:
		return p.read.MatchString(name)
	}
}

// User is an authenticated user as the connection layer sees it.
type User struct {
	Name string
	Tags []string
}

// loginRefused is RabbitMQ's text for every failed login: the reason is
// logged, never told to the client.
func loginRefused(mechanism string) *wire.Error {
	return wire.Errorf(wire.AccessRefused, "Login was refused using authentication mechanism %s. For details see the broker logfile.", mechanism)
}

// Authenticate checks a username and password presented with mechanism
// from addr.
//
// A cluster member that may be behind (restarted a moment ago) catches up
// before refusing: the user, or its new password, may have been committed
// through another node, and a client told ACCESS_REFUSED gives up rather
// than retry.
func (a *accessControl) Authenticate(mechanism, username, password string, addr net.Addr) (*User, error) {
	u, ok := a.user(username)
	valid := ok && u.PasswordHash != "" && CheckPassword(u.PasswordHash, password)
	if !valid && a.b.fresh.lookAgainAfterMiss() {
		u, ok = a.user(username)
		valid = ok && u.PasswordHash != "" && CheckPassword(u.PasswordHash, password)
	}
	if !valid {
		a.b.log.Warn("login refused: invalid credentials", "user", username, "mechanism", mechanism, "remote", addrString(addr))
		return nil, loginRefused(mechanism)
	}
	if slices.Contains(a.b.cfg.LoopbackUsers, username) && !isLoopback(addr) {
		a.b.log.Warn("login refused: user can only connect via localhost", "user", username, "remote", addrString(addr))
		return nil, loginRefused(mechanism)
	}
	return &User{Name: u.Name, Tags: u.Tags}, nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func isLoopback(a net.Addr) bool {
	switch t := a.(type) {
	case *net.TCPAddr:
		return t.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AuthenticateExternal logs in username, named by a client certificate the
// AMQPS listener verified (the EXTERNAL mechanism): the user must exist,
// and its password is not asked for, as with rabbitmq_auth_mechanism_ssl.
func (a *accessControl) AuthenticateExternal(username string, addr net.Addr) (*User, error) {
	u, ok := a.user(username)
	if !ok && a.b.fresh.lookAgainAfterMiss() {
		u, ok = a.user(username)
	}
	if !ok || username == "" {
		a.b.log.Warn("login refused: no such user for the client certificate", "user", username, "mechanism", "EXTERNAL", "remote", addrString(addr))
		return nil, loginRefused("EXTERNAL")
	}
	if slices.Contains(a.b.cfg.LoopbackUsers, username) && !isLoopback(addr) {
		a.b.log.Warn("login refused: user can only connect via localhost", "user", username, "remote", addrString(addr))
		return nil, loginRefused("EXTERNAL")
	}
	return &User{Name: u.Name, Tags: u.Tags}, nil
}
