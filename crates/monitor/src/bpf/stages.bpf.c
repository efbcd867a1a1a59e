// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Per-packet timestamps at the stages of a kernel DuT, keyed by the nflab probe,
 * from BTF tracepoints only (fentry does not load on this project's reference
 * host: see docs/monitor.md).
 *
 * Hooks that see the skb read the probe from it (through a dynptr, so paged skbs
 * work). Hooks that see no skb (sk_data_ready, fib_table_lookup) run in the same
 * softirq pass as the DuT's receive tracepoint on the same CPU, and take the probe
 * it parked on that CPU. Only the programs of the DuT's path are attached (user
 * space picks them). */
#include "nflab_core.h"
#include "ringbuf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "packet.h"

enum hook {
	HOOK_INGRESS = 0,
	HOOK_ROUTE = 1,
	HOOK_ENQUEUE = 2,
	HOOK_RECV = 3,
	HOOK_QUEUE = 4,
	HOOK_EGRESS = 5,
};

struct config {
	__u32 netns;
	__u32 ingress_ifindex;
	__u32 egress_ifindex;
	__u32 enabled;
};

struct event {
	__u64 t_ns;
	__u64 seq;
	__u16 flow;
	__u8 hook;
	__u8 pad[5];
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
	__type(value, __u64);
} ringbuf_full SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct parked);
} parked SEC(".maps");

/* The events ring; a quarter full wakes the consumer. */
#define EVENTS_BYTES (1 << 23)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, EVENTS_BYTES);
} events SEC(".maps");

static __always_inline struct config *cfg(void)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	return c && c->enabled ? c : 0;
}

static __always_inline bool on_dev(struct config *c, struct net_device *dev, __u32 ifindex)
{
	return BPF_CORE_READ(dev, ifindex) == ifindex && dev_netns(dev) == c->netns;
}

static __always_inline struct parked *parked_here(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&parked, &zero);
}

static __always_inline void emit(__u64 t, struct pkt_key *k, __u8 hook)
{
	__u32 zero = 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u64 *v = bpf_map_lookup_elem(&ringbuf_full, &zero);
		if (v)
			__sync_fetch_and_add(v, 1);
		return;
	}
	e->t_ns = t;
	e->seq = k->seq;
	e->flow = k->flow;
	e->hook = hook;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, ringbuf_wakeup_flags(&events, EVENTS_BYTES / 4));
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(stage_ingress, struct sk_buff *skb)
{
	__u64 t = bpf_ktime_get_tai_ns();
	struct config *c = cfg();
	struct parked *p;
	__u16 dport;

	if (!c || !on_dev(c, BPF_CORE_READ(skb, dev), c->ingress_ifindex))
		return 0;
	p = parked_here();
	if (!p)
		return 0;
	p->valid = 0;
	p->routed = 0;
	if (skb_udp_key(skb, 0, &p->key, &dport) || !p->key.has_seq)
		return 0;
	p->valid = 1;
	emit(t, &p->key, HOOK_INGRESS);
	return 0;
}

/* The router's forwarding decision: its route lookup for the parked packet. */
SEC("tp_btf/fib_table_lookup")
int BPF_PROG(stage_route, __u32 tb_id, const struct flowi4 *flp)
{
	__u64 t = bpf_ktime_get_tai_ns();
	struct config *c = cfg();
	struct parked *p;

	if (!c || BPF_CORE_READ(flp, __fl_common.flowic_iif) != c->ingress_ifindex)
		return 0;
	p = parked_here();
	if (!p || !p->valid || p->routed)
		return 0;
	p->routed = 1;
	emit(t, &p->key, HOOK_ROUTE);
	return 0;
}

/* The relay's socket gets the datagram (end of the kernel's UDP receive path). */
SEC("tp_btf/sk_data_ready")
int BPF_PROG(stage_enqueue, const struct sock *sk)
{
	__u64 t = bpf_ktime_get_tai_ns();
	struct config *c = cfg();
	struct parked *p;

	if (!c || sock_netns((struct sock *)sk) != c->netns)
		return 0;
	p = parked_here();
	if (!p || !p->valid)
		return 0;
	p->valid = 0;
	emit(t, &p->key, HOOK_ENQUEUE);
	return 0;
}

/* The relay's recv copies the datagram out (the UDP header is pulled already).
 * A queued UDP skb names neither socket nor device any more: the relay's thread
 * lives in the DuT's namespace, so the calling task's namespace tells. */
SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(stage_recv, const struct sk_buff *skb, int len)
{
	__u64 t = bpf_ktime_get_tai_ns();
	struct config *c = cfg();
	struct task_struct *task = bpf_get_current_task_btf();
	struct pkt_key k;

	if (!c || BPF_CORE_READ(task, nsproxy, net_ns, ns.inum) != c->netns)
		return 0;
	if (skb_payload_key(skb, 0, &k) || !k.has_seq)
		return 0;
	emit(t, &k, HOOK_RECV);
	return 0;
}

static __always_inline void at_egress_dev(struct sk_buff *skb, struct net_device *dev, __u8 hook)
{
	__u64 t = bpf_ktime_get_tai_ns();
	struct config *c = cfg();
	struct pkt_key k;
	__u16 dport;

	if (!c || !on_dev(c, dev, c->egress_ifindex))
		return;
	if (skb_udp_key(skb, ETH_HLEN, &k, &dport) || !k.has_seq)
		return;
	emit(t, &k, hook);
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(stage_queue, struct sk_buff *skb)
{
	at_egress_dev(skb, BPF_CORE_READ(skb, dev), HOOK_QUEUE);
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(stage_egress, struct sk_buff *skb, struct net_device *dev)
{
	at_egress_dev(skb, dev, HOOK_EGRESS);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
