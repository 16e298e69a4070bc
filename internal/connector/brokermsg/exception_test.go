package brokermsg

import "testing"

func TestExceptionCode(t *testing.T) {
	cases := []struct {
		name    string
		classes []string
		message string
		stack   string
		want    string
	}{
		{"socket timeout", []string{"java.net.SocketTimeoutException"}, "Read timed out", "", CodeTimeout},
		{"kafka timeout", []string{"org.apache.kafka.common.errors.TimeoutException"}, "", "", CodeTimeout},
		{"connect", []string{"java.net.ConnectException"}, "", "", CodeUnavailable},
		{"refused by message", nil, "Connection refused (Connection refused)", "", CodeUnavailable},
		{"jackson", []string{"com.fasterxml.jackson.core.JsonParseException"}, "Unexpected character", "", CodeParse},
		{"kafka deserialization", []string{"org.apache.kafka.common.errors.SerializationException"}, "", "", CodeParse},
		{"spring deserialization", []string{"org.springframework.kafka.support.serializer.DeserializationException"}, "", "", CodeParse},
		{"avro", []string{"org.apache.avro.AvroTypeException"}, "", "", CodeParse},
		{"access denied", []string{"org.springframework.security.access.AccessDeniedException"}, "", "", CodeDenied},
		{"kafka authz", []string{"org.apache.kafka.common.errors.TopicAuthorizationException"}, "", "", CodeDenied},
		// Spring AMQP wraps the listener's exception: the cause decides.
		{"wrapped cause", nil, "Listener method threw exception",
			"org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener method threw exception\n" +
				"\tat org.springframework.amqp...\nCaused by: java.net.SocketTimeoutException: Read timed out\n\tat java.base/...", CodeTimeout},
		{"deepest cause wins", []string{"java.lang.RuntimeException", "com.fasterxml.jackson.databind.exc.MismatchedInputException"}, "", "", CodeParse},
		{"unknown", []string{"java.lang.IllegalStateException"}, "order 17 has no customer", "", ""},
		{"nothing", nil, "", "", ""},
	}
	for _, c := range cases {
		if got := ExceptionCode(c.classes, c.message, c.stack); got != c.want {
			t.Errorf("%s: ExceptionCode = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestBodyKeepsBytes(t *testing.T) {
	for _, b := range [][]byte{[]byte(`{"a":1, "b":"<&>"}`), {0xff, 0x00, 0x01}, {}, []byte("plain text\n")} {
		got, err := NewBody(b).Bytes()
		if err != nil || string(got) != string(b) {
			t.Errorf("body %q came back as %q (%v)", b, got, err)
		}
	}
	if _, err := (Body{}).Bytes(); err == nil {
		t.Error("an empty envelope gave a body")
	}
	if got, _ := NewBin(nil).Bytes(); got != nil {
		t.Errorf("nil bin came back as %q", got)
	}
	if got, _ := NewBin([]byte{0xfe}).Bytes(); string(got) != "\xfe" {
		t.Errorf("binary bin came back as %q", got)
	}
}

func TestLineage(t *testing.T) {
	l := SetLineage(nil, "k1", "2")
	if l[LabelReplayOf] != "k1" || l[LabelReplayCount] != "2" || NextCount(l) != 3 {
		t.Errorf("labels %v, next %d", l, NextCount(l))
	}
	if l := SetLineage(nil, "", "5"); l != nil {
		t.Errorf("no key made labels %v", l)
	}
	if l := SetLineage(nil, "k", "x"); l[LabelReplayCount] != "1" {
		t.Errorf("bad count: %v", l)
	}
	if NextCount(nil) != 1 {
		t.Error("first replay is not 1")
	}
}
