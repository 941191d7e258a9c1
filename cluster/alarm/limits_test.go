package alarm

import "testing"

func TestParseLimits(t *testing.T) {
	ram, err := TotalMemory()
	if err != nil || ram <= 0 {
		t.Fatalf("TotalMemory = %d, %v", ram, err)
	}
	for _, c := range []struct {
		in   string
		disk bool
		want int64
	}{
		{"50MB", true, 50_000_000},
		{"50000000", true, 50_000_000},
		{"2GiB", true, 2 << 30},
		{"2 GB", true, 2_000_000_000},
		{"512k", true, 512 << 10},
		{"1kB", true, 1000},
		{"0", true, 0},
		{"mem_relative:1.0", true, ram},
		{"mem_relative:0.5", true, ram / 2},
		{"0.4", false, int64(0.4 * float64(ram))},
		{"0", false, 0},
		{"1073741824", false, 1 << 30},
		{"1GiB", false, 1 << 30},
		{"800MB", false, 800_000_000},
		{"1e9", false, 1_000_000_000},
	} {
		parse := ParseMemoryLimit
		if c.disk {
			parse = ParseDiskFreeLimit
		}
		got, err := parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("parse %q (disk %v) = %d, %v; want %d", c.in, c.disk, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "lots", "-1", "5XB", "mem_relative:x", "9999999999TiB"} {
		if n, err := ParseDiskFreeLimit(bad); err == nil {
			t.Errorf("ParseDiskFreeLimit(%q) = %d, want an error", bad, n)
		}
	}
	for _, bad := range []string{"", "lots", "-0.4", "mem_relative:1.0"} {
		if n, err := ParseMemoryLimit(bad); err == nil {
			t.Errorf("ParseMemoryLimit(%q) = %d, want an error", bad, n)
		}
	}
}
