package sqs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
)

// marshalled is the envelope as entryOf first wrote it, with
// json.Marshal: appendEnvelope must write the same bytes (a message read
// again gives the payload it gave before; the ledger tells a changed
// payload by its hash).
func marshalled(t *testing.T, m *types.Message) []byte {
	t.Helper()
	id := aws.ToString(m.MessageId)
	env := envelope{Body: brokermsg.NewBody([]byte(aws.ToString(m.Body))), MessageID: id, Attributes: m.Attributes,
		MessageAttributes: map[string]attribute{}}
	for k, v := range m.MessageAttributes {
		a := attribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		if v.BinaryValue != nil {
			a.BinaryValue = base64.StdEncoding.EncodeToString(v.BinaryValue)
		}
		env.MessageAttributes[k] = a
	}
	p, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sameAsMarshalled(t *testing.T, m *types.Message) {
	t.Helper()
	got, want := appendEnvelope(nil, m, aws.ToString(m.MessageId)), marshalled(t, m)
	if !bytes.Equal(got, want) {
		t.Fatalf("appendEnvelope\n %s\njson.Marshal\n %s", got, want)
	}
}

func TestAppendEnvelopeIsMarshal(t *testing.T) {
	sameAsMarshalled(t, benchMessage())
	sameAsMarshalled(t, &types.Message{})
	sameAsMarshalled(t, &types.Message{MessageId: aws.String("m<1>&"), Body: aws.String("")})
	sameAsMarshalled(t, &types.Message{MessageId: aws.String("m2"), Body: aws.String("bad \xff utf-8"),
		Attributes: map[string]string{}, MessageAttributes: map[string]types.MessageAttributeValue{}})
	sameAsMarshalled(t, &types.Message{MessageId: aws.String("m3"), Body: aws.String(`<b>"x"</b> & \u2028` + "\u2028\t\b\f"),
		Attributes: map[string]string{"Zeta": "1", "alpha": "<&>", "Beta": "\xfe", "": "empty key"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"bin":        {DataType: aws.String("Binary"), BinaryValue: []byte{0, 0xff, 1}},
			"empty-bin":  {DataType: aws.String("Binary"), BinaryValue: []byte{}},
			"nil-string": {DataType: aws.String("String")},
			"empty":      {DataType: aws.String("String"), StringValue: aws.String("")},
			"n":          {StringValue: aws.String("42")},
			"Upper<>":    {DataType: aws.String("String.custom"), StringValue: aws.String(strings.Repeat("é", 50))},
		}})
}

func FuzzAppendEnvelopeIsMarshal(f *testing.F) {
	f.Add("m1", `{"o":1}`, "ApproximateReceiveCount", "1", "x-exception-message", "<timeout>", []byte{1, 2})
	f.Add("", "\xff", "", "", "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, id, body, ak, av, mk, mv string, bin []byte) {
		m := &types.Message{MessageId: aws.String(id), Body: aws.String(body),
			Attributes: map[string]string{ak: av, av: ak},
			MessageAttributes: map[string]types.MessageAttributeValue{mk: {DataType: aws.String(av), StringValue: aws.String(mv)},
				mv: {DataType: aws.String("Binary"), BinaryValue: bin}}}
		sameAsMarshalled(t, m)
	})
}
