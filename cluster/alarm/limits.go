package alarm

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The watermarks are written as RabbitMQ writes them: the memory high
// watermark as a fraction of RAM (0.4) or an amount; the disk free limit
// as an amount, or "mem_relative:F" for F times RAM (rabbitmqctl
// set_disk_free_limit mem_relative F). An amount is a byte count with an
// optional unit: kB, MB, GB, TB are powers of 1000; k/KiB, M/MiB, G/GiB,
// T/TiB powers of 1024 (RabbitMQ's information units).

// ParseMemoryLimit reads a memory high watermark into bytes; 0 disables
// the memory alarm.
func ParseMemoryLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		if f < 1 {
			return ofRAM(f)
		}
		return int64(f), nil // a byte count, perhaps as 1e9
	}
	n, err := ParseAmount(s)
	if err != nil {
		return 0, fmt.Errorf("a memory high watermark is a fraction of RAM (0.4) or an amount (1073741824, 1GiB), not %q", s)
	}
	return n, nil
}

// ParseDiskFreeLimit reads a disk free limit into bytes; 0 disables the
// disk alarm.
func ParseDiskFreeLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if rel, ok := strings.CutPrefix(s, "mem_relative:"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(rel), 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("mem_relative needs a non-negative factor of RAM, not %q", rel)
		}
		return ofRAM(f)
	}
	n, err := ParseAmount(s)
	if err != nil {
		return 0, fmt.Errorf("a disk free limit is an amount (50MB, 2GiB, 1000000000) or mem_relative:F (F times RAM), not %q", s)
	}
	return n, nil
}

var units = []struct {
	suffix string
	factor int64
}{
	// Longest first, so "KiB" is not read as "B" after "Ki".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseAmount reads an amount (above) into bytes.
func ParseAmount(s string) (int64, error) {
	s = strings.TrimSpace(s)
	factor := int64(1)
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, factor = strings.TrimSpace(num), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/factor {
		return 0, fmt.Errorf("bad amount %q", s)
	}
	return n * factor, nil
}

func ofRAM(f float64) (int64, error) {
	ram, err := TotalMemory()
	if err != nil {
		return 0, err
	}
	return int64(f * float64(ram)), nil
}

// TotalMemory is the memory available to the node, in bytes: the
// machine's physical memory, or its control group's memory limit if that
// is lower (a container started with a memory limit), so that a relative
// watermark is a fraction of what the node may use before the kernel
// kills it.
func TotalMemory() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("read physical memory size: %w", err)
	}
	ram := int64(si.Totalram) * int64(si.Unit)
	if limit, ok := cgroupMemoryLimit(); ok && limit < ram {
		return limit, nil
	}
	return ram, nil
}

// The control group memory limit files, cgroup v2's then v1's, as seen
// from inside a container (which has its own cgroup namespace) or a
// systemd unit with MemoryMax on a v2 host.
var cgroupLimitFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

func cgroupMemoryLimit() (int64, bool) {
	for _, f := range cgroupLimitFiles {
		if b, err := os.ReadFile(f); err == nil {
			return parseCgroupLimit(string(b))
		}
	}
	return 0, false
}

// parseCgroupLimit reads a memory limit file: a byte count, or "max"
// (v2) for none; v1 writes no limit as a count near 2^63, which is no
// smaller than any machine's memory and so changes nothing.
func parseCgroupLimit(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
