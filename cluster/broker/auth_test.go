package broker

import "testing"

func TestPasswordHash(t *testing.T) {
	h := HashPassword("s3cret")
	if !CheckPassword(h, "s3cret") {
		t.Fatal("password does not match its own hash")
	}
	if CheckPassword(h, "s3cre") || CheckPassword(h, "") {
		t.Fatal("wrong password accepted")
	}
	if HashPassword("s3cret") == h {
		t.Fatal("two hashes of one password share a salt")
	}
	// The worked example of RabbitMQ's passwords guide: salt 908DC60A,
	// password "test12". A definitions file exported from RabbitMQ carries
	// hashes in exactly this form.
	const rabbitHash = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR"
	if got := hashWithSalt([]byte{0x90, 0x8d, 0xc6, 0x0a}, "test12"); got != rabbitHash {
		t.Fatalf("hash of RabbitMQ's example = %s, want %s", got, rabbitHash)
	}
	if !CheckPassword(rabbitHash, "test12") {
		t.Fatal("RabbitMQ's example hash not accepted")
	}
	if CheckPassword("not base64!", "x") {
		t.Fatal("garbage hash accepted")
	}
}

func TestEmptyPatternGrantsNothing(t *testing.T) {
	re, err := compilePattern("")
	if err != nil {
		t.Fatal(err)
	}
	if re.MatchString("q") || re.MatchString("amq.gen-x") {
		t.Fatal("empty pattern granted access")
	}
}
