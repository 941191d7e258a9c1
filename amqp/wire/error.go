package wire

import (
	"fmt"
	"unicode/utf8"
)

// Error is a protocol error with the reply code to close with. Hard errors close the
// connection, soft ones the channel.
type Error struct {
	Code     uint16
	Text     string // reply-text, e.g. "PRECONDITION_FAILED - inequivalent arg 'durable' ..."
	ClassID  uint16 // the method that caused it, 0 if none
	MethodID uint16
}

// Errorf returns an error whose Text is the reply code's name, " - ", and the formatted
// explanation, the way RabbitMQ writes reply-text. Text is cut to 255 bytes, as RabbitMQ cuts
// it, because reply-text is a short string and an error must always be sendable.
func Errorf(code uint16, format string, args ...any) *Error {
	text := ReplyName(code) + " - " + fmt.Sprintf(format, args...)
	return &Error{Code: code, Text: truncateShortstr(text)}
}

func (e *Error) Error() string {
	if name := MethodName(e.ClassID, e.MethodID); name != "" {
		return fmt.Sprintf("amqp %d: %s (in %s)", e.Code, e.Text, name)
	}
	return fmt.Sprintf("amqp %d: %s", e.Code, e.Text)
}

// Hard reports whether the error closes the whole connection rather than one channel.
func (e *Error) Hard() bool { return IsHardCode(e.Code) }

// ConnectionClose returns the connection.close that reports the error.
func (e *Error) ConnectionClose() *ConnectionClose {
	return &ConnectionClose{
		ReplyCode:       e.Code,
		ReplyText:       truncateShortstr(e.Text),
		FailingClassID:  e.ClassID,
		FailingMethodID: e.MethodID,
	}
}

// ChannelClose returns the channel.close that reports the error.
func (e *Error) ChannelClose() *ChannelClose {
	return &ChannelClose{
		ReplyCode:       e.Code,
		ReplyText:       truncateShortstr(e.Text),
		FailingClassID:  e.ClassID,
		FailingMethodID: e.MethodID,
	}
}

// truncateShortstr cuts s to the 255 bytes a short string holds, without splitting a UTF-8
// sequence.
func truncateShortstr(s string) string {
	if len(s) <= maxShortstr {
		return s
	}
	cut := maxShortstr
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// methodError returns the error for a method frame that failed to decode, blaming the method.
func methodError(code uint16, classID, methodID uint16, format string, args ...any) *Error {
	e := Errorf(code, format, args...)
	e.ClassID, e.MethodID = classID, methodID
	return e
}
