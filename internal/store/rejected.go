package store

// MarkRejected puts an entry whose approval a was rejected into the
// rejected state, held with the rejector and the reason, so it neither
// waits for an approval that will not come nor counts as awaiting one.
// A person releases it (the next reconcile decides afresh), resolves it,
// or asks again. It reports whether it changed the record.
func (r *EntryRecord) MarkRejected(a *Approval) bool {
	if a == nil || a.State != ApprovalRejected || r.Hold == HoldResolved {
		return false
	}
	r.Status, r.Hold = StatusRejected, HoldRejected
	r.Reason = "rejected by " + a.DecidedBy + ": " + a.Reason
	return true
}
