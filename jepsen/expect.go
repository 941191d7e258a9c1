package main

import (
	"fmt"
	"strings"
	"time"
)

// expectations are the workloads a run had. A workload that ran and left
// no trace in the history tested nothing, and the run cannot vouch for
// what it was there to test.
type expectations struct {
	// Ordered are the queues that promise order (order.go): the single
	// active consumer queues.
	Ordered []string `json:"ordered,omitempty"`
	// Large are the queues whose bodies span several frames (large.go).
	Large []string `json:"large,omitempty"`
	// Crashing says consumers dropped their connections while holding
	// messages (crash.go).
	Crashing bool `json:"crashing,omitempty"`
}

// exercised counts what the workloads and the nemesis did, for the
// verdict to show that the run tested what it claims.
type exercised struct {
	// Abandoned deliveries were held, unacked, by a consumer that dropped
	// its connection; AbandonedBack of them came again, flagged
	// redelivered, as the next delivery of the message.
	Abandoned     int `json:"abandoned"`
	AbandonedBack int `json:"abandoned_back"`
	// Large counts the messages with bodies of several frames delivered
	// intact.
	Large int `json:"large"`
	// Ordered counts the first deliveries the order check judged;
	// OrderExempt the redeliveries on ordered queues it let be.
	Ordered     int `json:"ordered"`
	OrderExempt int `json:"order_exempt"`
	// FaultsApplied counts the faults the nemesis applied; MinFaults is
	// the fewest the run accepts (--min-faults).
	FaultsApplied int `json:"faults_applied"`
	MinFaults     int `json:"min_faults"`
}

func (e exercised) String() string {
	parts := []string{
		fmt.Sprintf("%d messages held by consumers that dropped their connection (%d of them came back flagged redelivered)", e.Abandoned, e.AbandonedBack),
		fmt.Sprintf("%d multi-frame messages delivered intact", e.Large),
		fmt.Sprintf("%d first deliveries checked for order (%d redeliveries exempt)", e.Ordered, e.OrderExempt),
	}
	if e.FaultsApplied > 0 || e.MinFaults > 0 {
		parts = append(parts, fmt.Sprintf("%d faults applied (at least %d wanted)", e.FaultsApplied, e.MinFaults))
	}
	return "exercised: " + strings.Join(parts, "; ")
}

// checkExercised fails, as not observed, each workload that ran without
// leaving a trace. The caller holds h.mu.
func (h *history) checkExercised(v *verdict) {
	e := h.expect
	if len(e.Large) > 0 && v.Exercised.Large == 0 {
		v.Unobserved = append(v.Unobserved, "multi-frame bodies: none was delivered intact")
	}
	if e.Crashing && v.Exercised.Abandoned == 0 {
		v.Unobserved = append(v.Unobserved, "consumers dropping their connection: none held a message when it did")
	}
	if len(e.Ordered) > 0 && v.Exercised.Ordered == 0 {
		v.Unobserved = append(v.Unobserved, "the order of the single active consumer queues: no first delivery from them")
	}
}

// faultOutcomes are the faults the nemesis tried, as the facts keep them.
func faultOutcomes(records []faultRecord) []faultOutcome {
	var out []faultOutcome
	for _, r := range records {
		out = append(out, faultOutcome{What: strings.TrimSpace(r.Kind + " " + strings.Join(r.Nodes, " ")), Error: r.Error})
	}
	return out
}

// defaultMinFaults is --min-faults's default: a round of the nemesis holds
// its fault, runs an operation (up to two holds) and pauses, at most four
// holds in all, so a run of duration applies at least duration/(4*hold)
// faults when each one takes.
func defaultMinFaults(duration, hold time.Duration, kinds int) int {
	if kinds == 0 || hold <= 0 {
		return 0
	}
	return max(1, int(duration/(4*hold)))
}
