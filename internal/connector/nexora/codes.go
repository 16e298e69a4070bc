package nexora

import "github.com/replayctl/replayctl/internal/connector"

// Codes lists the failure codes Nexora writes (iamvirul/nexora
// DeadLetterRecord.java failureCode): only STEP_FAILED and
// UNEXPECTED_ERROR, which say nothing about the cause, so they are generic
// and the message patterns decide.
func Codes() []connector.Code {
	const where = "iamvirul/nexora DeadLetterRecord.java failureCode"
	return []connector.Code{
		{Code: "step_failed", Class: "generic", Where: where + ": STEP_FAILED"},
		{Code: "unexpected_error", Class: "generic", Where: where + ": UNEXPECTED_ERROR"},
	}
}
