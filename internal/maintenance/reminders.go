package maintenance

import "context"

// NewReminders is the duty that reminds approvers of requests pending
// past serve's --notify-aging, every o.Every, whether or not a run
// happens (a broken rules file refuses runs, and the approvals then wait
// longest). remind is the server's (audited, once per period per request,
// so a round after a run's reminder sends nothing).
func NewReminders(remind func(ctx context.Context) error, o Options) (*Periodic, error) {
	return NewPeriodic("approval-reminders", o, func(ctx context.Context) ([]any, error) {
		return nil, remind(ctx)
	})
}
