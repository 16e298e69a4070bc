package cordum

import (
	"regexp"
)

// cordumRetrySuffix is what Cordum's DLQ retry appends to a job id: the
// retry is a new job `<id>-retry-<first 8 characters of a UUID>`
// (finmaster1/cordum core/controlplane/gateway/handlers_dlq.go:157 at
// e00450ed; handleRetryDLQ, newJobID := jobID + "-retry-" +
// uuid.NewString()[:8], read at 03790ac7), which the scheduler dead-letters
// again under its own id when it fails (scheduler/engine.go:3066-3085).
var cordumRetrySuffix = regexp.MustCompile(`-retry-[0-9a-f]{8}$`)

// cordumLineage is a Cordum job's lineage: the job it was retried from,
// however many retries deep ("cordum:" + the id without its -retry-
// suffixes).
func cordumLineage(jobID string) string {
	root := jobID
	if a := cordumAncestors(jobID); len(a) > 0 {
		root = a[len(a)-1]
	}
	return Kind + ":" + root
}

// cordumAncestors are the jobs a Cordum retry job was created from,
// nearest first (none for a job that is not a retry).
func cordumAncestors(jobID string) []string {
	var out []string
	for {
		loc := cordumRetrySuffix.FindStringIndex(jobID)
		if loc == nil || loc[0] == 0 {
			return out
		}
		jobID = jobID[:loc[0]]
		out = append(out, jobID)
	}
}
