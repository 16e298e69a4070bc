package postgres

// StopOwnSealer ends the sealer loop Open started (sealing what it
// can first), for a caller that seals on a schedule of its own: serve's
// audit-sealer duty (internal/maintenance), which also seals last at its
// stop, as Close would have. Call it right after opening, before the
// store is shared with anything else.
func (p *Postgres) StopOwnSealer() {
	if p.stopSealer != nil {
		p.stopSealer()
		p.stopSealer = nil
	}
}
