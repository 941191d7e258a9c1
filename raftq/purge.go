package raftq

// purge removes every ready message, and the dead-lettered ones awaiting
// confirmation (rabbit_fifo: purge counts and drops both). Checked-out
// messages stay.
func (m *Machine) purge() {
	n := m.ready.clear() + m.delayed.clear() + m.dead.clear()
	m.emit(Effect{Kind: EffectPurged, Count: uint32(n)})
}
