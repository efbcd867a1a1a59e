// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The capture's XDP tap: copy each received frame (its first `snaplen` bytes, its
 * length and a CLOCK_TAI stamp) into a BPF ring buffer and pass the frame on,
 * untouched — a tap, never a sink. One consumer thread in user space drains the
 * ring into the capture's inner queues (crates/capture, producer_xdp.rs).
 *
 * Wakeups are batched: a record is committed with BPF_RB_NO_WAKEUP unless the
 * ring holds `wakeup_bytes` or more, so the consumer is not woken per frame; it
 * polls with a short timeout instead. A record the ring has no room for is
 * counted (C_RING_FULL), never lost silently. */
#include "nflab_core.h"
#include "ringbuf.h"
#include <bpf/bpf_helpers.h>

/* Largest snap length: the scratch buffer's size (a power of two). */
#define MAX_SNAP 4096

enum counter {
	C_SEEN = 0,
	C_RING_FULL = 1,
	C_COPY_FAILED = 2,
	C_MAX = 3,
};

/* Set by the loader before load. */
const volatile __u32 snaplen = 2048;
const volatile __u64 wakeup_bytes = 1 << 20;

struct frame_hdr {
	__u64 ts_ns;
	__u32 wire_len;
	__u32 cap_len;
};

struct scratch {
	struct frame_hdr hdr;
	__u8 data[MAX_SNAP];
};

/* The loader sets the size (max_entries) before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 25);
} frames SEC(".maps");

/* The record is assembled here (a map value, so its length may vary), then
 * copied into the ring in one bpf_ringbuf_output. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 c)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		*v += 1; /* per CPU: no atomics needed */
}

SEC("xdp")
int nflab_tap(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	__u64 flags;
	__u32 wire, cap;

	if (!s)
		return XDP_PASS;
	count(C_SEEN);
	wire = bpf_xdp_get_buff_len(ctx);
	cap = wire < snaplen ? wire : snaplen;
	/* Bounds the verifier can see: 1 ..= MAX_SNAP. */
	cap &= 2 * MAX_SNAP - 1;
	if (cap > MAX_SNAP)
		cap = MAX_SNAP;
	if (cap == 0)
		return XDP_PASS;
	if (bpf_xdp_load_bytes(ctx, 0, s->data, cap) < 0) {
		count(C_COPY_FAILED);
		return XDP_PASS;
	}
	s->hdr.ts_ns = bpf_ktime_get_tai_ns();
	s->hdr.wire_len = wire;
	s->hdr.cap_len = cap;
	flags = ringbuf_wakeup_flags(&frames, wakeup_bytes);
	if (bpf_ringbuf_output(&frames, s, sizeof(s->hdr) + cap, flags) < 0)
		count(C_RING_FULL);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
