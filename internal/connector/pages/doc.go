// Package pages is the generic part of a connector that talks to a
// running system's HTTP API: Reader fetches its DLQ one page at a time
// (credentials as headers, retries with backoff for 5xx and connection
// errors, never for 4xx or a redirect, bounded pages), and Endpoint sends
// its own replay, probe and write-back calls. Both go through
// connector/httpout. The system's connector owns the URLs, the paging
// loop, the decoding and the meaning of each status.
//
// It names no system and must never import one.
package pages
