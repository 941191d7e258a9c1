package main

import (
	"errors"
	"sync"
	"time"
)

// names are the nodes' names, in order.
func (c *cluster) names() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.name)
	}
	return out
}

// killAll kills the nodes given at once (SIGKILL to each concurrently) and
// waits until each has exited.
func (c *cluster) killAll(nodes []int) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for k, i := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[k] = c.nodes[i].kill() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// restartAll starts the nodes given, then waits until each takes logins:
// all are started before any is waited for, since a node of a cluster
// restarted whole takes no logins until a majority is back.
func (c *cluster) restartAll(nodes []int) error {
	var errs []error
	var started []int
	for _, i := range nodes {
		if c.nodes[i].running() {
			continue
		}
		if err := c.nodes[i].start(); err != nil {
			errs = append(errs, err)
			continue
		}
		started = append(started, i)
	}
	for _, i := range started {
		if err := c.nodes[i].waitReady(90 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
