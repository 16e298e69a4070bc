// Package cordum is the connector for Cordum's dead-letter queue: its
// file dumps (one DLQEntry object, a stream, an array, JSON Lines, or a
// gateway list response), its Redis layout (dlq:index and dlq:entry:<id>),
// the live gateway (GET /api/v1/dlq/page, following next_cursor), Cordum's
// own retry (POST /api/v1/dlq/{job_id}/retry), its compensating read and
// its write-back (DELETE /api/v1/dlq/{job_id}).
//
// It follows Cordum's gateway and store as written upstream
// (finmaster1/cordum, formerly cordum-io/cordum, at 03790ac7f816):
//   - core/controlplane/gateway/handlers_dlq.go: handleListDLQPage
//     (limit clamped by clampListLimit to maxListLimit 500; next_cursor is
//     the last entry's created_at in whole seconds minus one, and none when
//     that entry has no created_at), handleDeleteDLQ (204), handleRetryDLQ
//     (404 "dlq entry not found" when the entry is gone; a new job
//     <job_id>-retry-<8 hex>; the DLQ entry deleted; 200 {"job_id": NEW});
//   - core/controlplane/gateway/helpers.go: maxListLimit;
//   - core/infra/store/dlq_store.go: DLQEntry, dlq:index scored by
//     created_at, ListByScore.
//
// The newest gateway (finmaster1/cordum@e00450ed) drops other tenants'
// entries and those whose job metadata expired from each page and sends
// no next_cursor after a page it filtered short (handlers_dlq.go:64-88):
// the one page loop (walkPages) reads on from a short page's last entry,
// for the live source and the compensating read alike. CORDUM_TENANT_ID
// may list several tenants; each entry then carries its own (TenantLabel)
// to its retry, probe and delete. Job ids name a retry's ancestry
// (<id>-retry-<8 hex>, lineage.go).
//
// A retry can answer 200 and leave the entry listed: the gateway only
// logs a failed delete of the DLQ entry (gateway/handlers_dlq.go:231-233
// at e00450ed), so Cordum's own Retry button could run the job a second
// time. internal/replay settles such an entry (keptAfterReplay) with this
// connector's write-back, the DELETE the gateway meant to make.
//
// Credentials (CORDUM_API_KEY, CORDUM_TENANT_ID) come from the environment
// only, travel as X-API-Key and X-Tenant-ID through connector/httpout, and
// never appear in an error, a detail or a stored entry. It must never
// import another system's package, internal/replay or internal/server.
package cordum
