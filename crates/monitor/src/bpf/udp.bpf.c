// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* nflab's in-stack UDP monitor (seed 003's KOMon, on eBPF, without kprobes or fentry).
 *
 * Ingress: a socket filter attached to the VNF's own socket (SO_ATTACH_BPF on a
 * duplicate of its descriptor) reads the datagram's key (payload hash, nflab probe),
 * stamps it and emits the ingress event. The kernel runs it in the UDP receive path
 * right before the datagram is queued on the socket (udp_queue_rcv_one_skb →
 * sk_filter), after IP and UDP processing: KOMon's __udp4_lib_rcv point, and only
 * for the VNF's datagrams — no other packet of the host pays for it. Egress:
 * tp_btf/net_dev_queue sees the VNF's datagram leave (the first hook after
 * udp_sendmsg that exists without fentry: see docs/monitor.md); a datagram whose
 * key is in flight emits the egress event. Matching (FIFO or any) is in user space.
 *
 * Sampling: `budget` holds the packets left in the current sample; user space
 * refills it at exponentially distributed instants (mode 1), or every packet is
 * taken (mode 2), or none (mode 0) — all through maps, without reloading. */
#include "nflab_core.h"
#include "ringbuf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "packet.h"

#define MODE_OFF 0
#define MODE_SAMPLE 1
#define MODE_ALL 2

#define UDP_HLEN 8u

#define EV_IN 0
#define EV_OUT 1

enum counter {
	C_RINGBUF_FULL = 0,
	C_INGRESS = 1,
	C_SAMPLED = 2,
	C_EGRESS_NOT_IN_FLIGHT = 3,
	C_MAX = 4,
};

struct config {
	__u32 netns;
	__u32 mode;
	__u32 egress_ifindex;
};

struct event {
	__u64 t_ns;
	__u64 hash;
	__u64 seq;
	__u16 flow;
	__u8 kind;
	__u8 has_seq;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} budget SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* payload hash -> sampled datagrams with that hash that have not left yet. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} in_flight SEC(".maps");

/* The events ring; a quarter full wakes the consumer. */
#define EVENTS_BYTES (1 << 22)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, EVENTS_BYTES);
} events SEC(".maps");

static __always_inline void count(__u32 c)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		__sync_fetch_and_add(v, 1);
}

/* Datagrams taken at ingress and not yet seen at egress, all keys together. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} flying SEC(".maps");

static __always_inline void flying_add(__s64 d)
{
	__u32 zero = 0;
	__s64 *v = bpf_map_lookup_elem(&flying, &zero);
	if (v)
		__sync_fetch_and_add(v, d);
}

static __always_inline __s64 flying_now(void)
{
	__u32 zero = 0;
	__s64 *v = bpf_map_lookup_elem(&flying, &zero);
	/* No map value: behave as if something were in flight (the slow, exact path). */
	return v ? *v : 1;
}

static __always_inline struct config *cfg(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&config, &zero);
}

/* Take one packet of the current sample, if any is left. */
static __always_inline bool take(__u32 mode)
{
	__u32 zero = 0;
	__s64 *b;

	if (mode == MODE_ALL)
		return true;
	if (mode != MODE_SAMPLE)
		return false;
	b = bpf_map_lookup_elem(&budget, &zero);
	if (!b || *b <= 0)
		return false;
	if (__sync_fetch_and_add(b, -1) <= 0) {
		__sync_fetch_and_add(b, 1);
		return false;
	}
	return true;
}

static __always_inline void emit(__u64 t, struct pkt_key *k, __u8 kind)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(C_RINGBUF_FULL);
		return;
	}
	e->t_ns = t;
	e->hash = k->hash;
	e->seq = k->seq;
	e->flow = k->flow;
	e->kind = kind;
	e->has_seq = k->has_seq;
	e->pad = 0;
	bpf_ringbuf_submit(e, ringbuf_wakeup_flags(&events, EVENTS_BYTES / 4));
}

/* The ingress event is emitted here, before the stack queues the datagram on the
 * VNF's socket: the event and the in-flight entry exist before the VNF can read
 * the datagram, so its egress always finds them.
 *
 * A socket filter's verdict is how many bytes to keep: every return keeps the
 * whole datagram (0 would drop it). */
SEC("socket")
int udp_ingress(struct __sk_buff *skb)
{
	__u32 keep = skb->len;
	struct config *c = cfg();
	struct pkt_key k;
	struct bpf_dynptr d;
	__u8 udp[UDP_HLEN];
	__u64 t, one = 1, *n;

	if (!c || c->mode == MODE_OFF)
		return keep;
	count(C_INGRESS);
	/* The payload is read and hashed only for a datagram taken: in sampling
	 * mode almost none are; the clock is read only then too. */
	if (!take(c->mode))
		return keep;
	t = bpf_ktime_get_tai_ns();
	/* Here the skb's data starts at the UDP header (IP's is pulled): its
	 * length field covers exactly the skb, which checks that. */
	if (bpf_dynptr_from_skb(skb, 0, &d) || bpf_dynptr_read(udp, UDP_HLEN, &d, 0, 0) ||
	    be16(udp + 4) != keep || keep < UDP_HLEN)
		return keep;
	if (dynptr_payload_key(&d, UDP_HLEN, keep - UDP_HLEN, &k))
		return keep;
	count(C_SAMPLED);
	flying_add(1);
	n = bpf_map_lookup_elem(&in_flight, &k.hash);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&in_flight, &k.hash, &one, BPF_ANY);
	emit(t, &k, EV_IN);
	return keep;
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(udp_egress, struct sk_buff *skb)
{
	__u64 t;
	struct config *c = cfg();
	struct net_device *dev;
	struct pkt_key k;
	__u16 dport;
	__u64 *n;

	/* Nothing taken in flight (and not taking every datagram, whose exact path
	 * counts the frames not in flight): this frame cannot match, so neither look
	 * at its device nor hash it. This hook sees every frame any device of the
	 * host queues; while sampling, almost all of them return here. A datagram
	 * taken just before the mode switched to off still finds its egress. */
	if (!c || (c->mode != MODE_ALL && flying_now() <= 0))
		return 0;
	dev = BPF_CORE_READ(skb, dev);
	if (BPF_CORE_READ(dev, ifindex) != c->egress_ifindex || dev_netns(dev) != c->netns)
		return 0;
	t = bpf_ktime_get_tai_ns();
	if (skb_udp_key(skb, ETH_HLEN, &k, &dport))
		return 0;
	n = bpf_map_lookup_elem(&in_flight, &k.hash);
	if (!n) {
		count(C_EGRESS_NOT_IN_FLIGHT);
		return 0;
	}
	if (__sync_fetch_and_add(n, -1) <= 1)
		bpf_map_delete_elem(&in_flight, &k.hash);
	flying_add(-1);
	emit(t, &k, EV_OUT);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
