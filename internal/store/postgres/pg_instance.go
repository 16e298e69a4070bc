package postgres

// Instance implements Backend: made once when the pool was opened.
func (p *Postgres) Instance() string { return p.instance }
