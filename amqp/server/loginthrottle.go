package server

import (
	"net"
	"time"
)

// LoginThrottle is the failed-login throttle AMQP logins go through,
// for the node's other front ends that check the same users' passwords
// (the management HTTP API), so that a password cannot be guessed at
// wire speed there either.
type LoginThrottle struct{ t loginThrottle }

// NewLoginThrottle returns a throttle whose first delay after a failed
// login is base, doubling per failure up to 5s; 0 turns it off.
func NewLoginThrottle(base time.Duration) *LoginThrottle {
	return &LoginThrottle{t: loginThrottle{base: base}}
}

// Delay is how long a login from addr waits before it is checked.
func (l *LoginThrottle) Delay(addr net.Addr) time.Duration { return l.t.delay(addr, time.Now()) }

// Failed records a refused login from addr.
func (l *LoginThrottle) Failed(addr net.Addr) { l.t.failed(addr, time.Now()) }

// Succeeded clears addr's failures.
func (l *LoginThrottle) Succeeded(addr net.Addr) { l.t.succeeded(addr) }
