// Package nexora is the connector for Nexora's dead letters: the
// observability server's list responses as files, the live server (GET
// /api/dead-letters?state=PENDING&page=N&size=M, read with a cursor on
// failedAt because the PENDING set moves while it is read), Nexora's own
// replay (POST /api/dead-letters/{id}/replay), its compensating read
// (reviewState) and its write-back (POST /api/dead-letters/{id}/resolve
// {"reason"}).
//
// It follows iamvirul/nexora: nexora-cli ObserveCommand.java (the routes,
// page size capped at 100, 202 {"accepted": true} on replay, 409 when the
// record is not PENDING, 404 when unknown), DeadLetterRecord.java (the
// record and its reviewState) and JdbcExecutionStore.findDeadLetters
// (WHERE review_state = ? ORDER BY failed_at DESC LIMIT ? OFFSET ?).
//
// NEXORA_TOKEN comes from the environment only, travels as a bearer token
// through connector/httpout and never appears in an error. It must never
// import another system's package, internal/replay or internal/server.
package nexora
