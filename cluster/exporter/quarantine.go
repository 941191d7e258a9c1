package exporter

// quarantine is the node's queue members set aside after storage damage
// (cluster/node's quarantine.go): a node-level flag to alert on, and the
// groups still to re-sync, of which some are catching up.
func (c *collector) quarantine(e *emitter) {
	q := c.n.Quarantine()
	e.gauge("warren_quarantined", "Does this node hold queue members quarantined after storage damage? (they do not vote or lead until re-synced)", boolGauge(q.Groups > 0))
	e.gauge("warren_quarantined_groups", "Queue groups whose member on this node awaits a re-sync after storage damage", float64(q.Groups))
	e.gauge("warren_quarantined_groups_resyncing", "Quarantined queue groups whose member on this node is open again and catching up as a non-voter", float64(q.Resyncing))
}
