package sqs

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// benchMessage is a message as the bench's DLQ holds it
// (internal/benchmark/brokers.go): a 920-byte JSON body, a stack trace
// attribute and the system attributes a receive asks for.
func benchMessage() *types.Message {
	return &types.Message{MessageId: aws.String("5fea7756-0ea4-451a-a703-a558b933e274"), ReceiptHandle: aws.String("rh"),
		Body: aws.String(`{"order":17,"note":"` + strings.Repeat("x", 900) + `"}`),
		Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764230400000", "SenderId": "AIDAEXAMPLE",
			"ApproximateFirstReceiveTimestamp": "1764230400100"},
		MessageAttributes: map[string]types.MessageAttributeValue{"x-exception-stacktrace": {DataType: aws.String("String"),
			StringValue: aws.String("x.ListenerExecutionFailedException: x\nCaused by: java.net.SocketTimeoutException: Read timed out\n")}}}
}

// BenchmarkEntryOf is the per-message cost of a read past the receive.
func BenchmarkEntryOf(b *testing.B) {
	c, err := Open("sqs:http://127.0.0.1:1/000000000000/orders-dlq?region=us-east-1")
	if err != nil {
		b.Fatal(err)
	}
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.entryOf(m)
	}
}
