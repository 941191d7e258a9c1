//go:build !linux

package main

import (
	"errors"
	"time"
)

// setTimerSlack is Linux's; elsewhere the kernel's timers are left as
// they are.
func setTimerSlack(time.Duration) (threads, refused int, err error) {
	return 0, 0, errors.ErrUnsupported
}
