package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReplyCodes(t *testing.T) {
	hard := []uint16{320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541}
	soft := []uint16{311, 312, 313, 403, 404, 405, 406}
	for _, c := range hard {
		if !IsHardCode(c) {
			t.Errorf("%d should be hard", c)
		}
	}
	for _, c := range append(soft, ReplySuccess, 999) {
		if IsHardCode(c) {
			t.Errorf("%d should not be hard", c)
		}
	}
	names := map[uint16]string{
		ReplySuccess: "REPLY_SUCCESS", ContentTooLarge: "CONTENT_TOO_LARGE", NoRoute: "NO_ROUTE",
		NoConsumers: "NO_CONSUMERS", ConnectionForced: "CONNECTION_FORCED", InvalidPath: "INVALID_PATH",
		AccessRefused: "ACCESS_REFUSED", NotFound: "NOT_FOUND", ResourceLocked: "RESOURCE_LOCKED",
		PreconditionFailed: "PRECONDITION_FAILED", FrameError: "FRAME_ERROR", SyntaxError: "SYNTAX_ERROR",
		CommandInvalid: "COMMAND_INVALID", ChannelError: "CHANNEL_ERROR", UnexpectedFrame: "UNEXPECTED_FRAME",
		ResourceError: "RESOURCE_ERROR", NotAllowed: "NOT_ALLOWED", NotImplemented: "NOT_IMPLEMENTED",
		InternalError: "INTERNAL_ERROR",
	}
	for code, name := range names {
		if got := ReplyName(code); got != name {
			t.Errorf("ReplyName(%d) = %q, want %q", code, got, name)
		}
	}
	if got := ReplyName(999); got != "999" {
		t.Errorf("ReplyName(999) = %q", got)
	}
}

func TestErrorf(t *testing.T) {
	e := Errorf(PreconditionFailed, "inequivalent arg '%s' for queue '%s'", "durable", "q")
	if e.Text != "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q'" {
		t.Fatalf("text %q", e.Text)
	}
	if e.Hard() || e.Code != 406 {
		t.Fatalf("%+v", e)
	}
	if got := e.Error(); got != "amqp 406: PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q'" {
		t.Fatalf("Error() = %q", got)
	}
	e.ClassID, e.MethodID = ClassQueue, 10
	if got := e.Error(); !strings.HasSuffix(got, "(in queue.declare)") {
		t.Fatalf("Error() = %q", got)
	}
	if !Errorf(NotAllowed, "x").Hard() {
		t.Fatal("530 should be hard")
	}
}

func TestErrorTextFitsAShortstr(t *testing.T) {
	e := Errorf(NotFound, "no queue '%s'", strings.Repeat("é", 200))
	if len(e.Text) > 255 || !utf8.ValidString(e.Text) {
		t.Fatalf("text of %d bytes, valid UTF-8: %v", len(e.Text), utf8.ValidString(e.Text))
	}
	// And so the close methods built from it always encode.
	long := &Error{Code: NotFound, Text: strings.Repeat("x", 1000), ClassID: ClassBasic, MethodID: 20}
	for _, m := range []Method{long.ConnectionClose(), long.ChannelClose()} {
		if _, err := AppendMethod(nil, m); err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
	}
	if c := long.ChannelClose(); c.ReplyCode != NotFound || c.FailingClassID != ClassBasic || c.FailingMethodID != 20 {
		t.Fatalf("%+v", c)
	}
}
