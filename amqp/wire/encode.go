package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// maxShortstr is the longest short string: its length is one octet.
const maxShortstr = 255

var (
	errShortstrTooLong = errors.New("shortstr longer than 255 bytes")
	errLongstrTooLong  = errors.New("longstr longer than 4 GiB")
)

// appendShortstr appends a short string; a longer string is an error, never silently cut.
// On error buf comes back unchanged.
func appendShortstr(buf []byte, s string) ([]byte, error) {
	if len(s) > maxShortstr {
		return buf, fmt.Errorf("%w: %d bytes", errShortstrTooLong, len(s))
	}
	buf = append(buf, byte(len(s)))
	return append(buf, s...), nil
}

// appendLongstr appends a long string or byte array: a 32-bit length and the bytes.
func appendLongstr[T string | []byte](buf []byte, s T) ([]byte, error) {
	if uint64(len(s)) > math.MaxUint32 {
		return buf, errLongstrTooLong
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
	return append(buf, s...), nil
}

// bit returns the octet with only the given bit set if set is true: consecutive bit arguments
// share an octet, the first in the lowest bit.
func bit(set bool, position uint) uint8 {
	if set {
		return 1 << position
	}
	return 0
}

// argError explains which argument of which method could not be encoded. Method and argument
// are constant strings so the happy path passes nothing that escapes.
func argError(method, argument string, err error) error {
	return fmt.Errorf("amqp: encoding %s argument %s: %w", method, argument, err)
}

func propertyError(property string, err error) error {
	return fmt.Errorf("amqp: encoding property %s: %w", property, err)
}
